"""The on-disk embedding cache, with a spy encoder that records what it is asked to encode."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation import embedding_cache
from evaluation.embedding_cache import cache_directory, encode_cached
from evaluation.encoders import EncoderError


class SpyEncoder:
    """Deterministic vectors derived from the text; remembers every batch it encoded."""

    def __init__(self, model_id: str = "spy/model", revision: str = "r" * 64, dim: int = 4):
        self.model_id, self.revision, self.dim = model_id, revision, dim
        self.prompts = {"query": "query: "}
        self.similarity_fn_name = "cosine"
        self.batches: list[list[str]] = []

    def encode(self, texts, *, batch_size=None, prompt_name=None):
        self.batches.append(list(texts))
        offset = 100.0 if prompt_name else 0.0
        return np.array([[len(t) + offset, ord(t[0]), i, self.dim] for i, t in enumerate(texts)], dtype=np.float32)


@pytest.fixture(autouse=True)
def fresh_process_state():
    # Each test acts like a new process: no store index survives from another test.
    embedding_cache._stores.clear()
    yield
    embedding_cache._stores.clear()


def test_second_call_encodes_nothing_and_order_is_kept(tmp_path):
    spy = SpyEncoder()
    first = encode_cached(spy, ["bb", "a", "ccc"], root=tmp_path)
    again = encode_cached(spy, ["ccc", "bb", "a"], root=tmp_path)
    assert spy.batches == [["bb", "a", "ccc"]]
    assert again.dtype == np.float32 and again.shape == (3, 4)
    np.testing.assert_array_equal(again, first[[2, 0, 1]])


def test_duplicates_are_encoded_once_and_only_new_texts_are_encoded(tmp_path):
    spy = SpyEncoder()
    vectors = encode_cached(spy, ["x", "y", "x", "x"], root=tmp_path)
    np.testing.assert_array_equal(vectors[0], vectors[2])
    encode_cached(spy, ["y", "z", "z"], root=tmp_path)
    assert spy.batches == [["x", "y"], ["z"]]


def test_cache_survives_a_new_process_and_sees_other_writers(tmp_path):
    spy = SpyEncoder()
    encode_cached(spy, ["one", "two"], root=tmp_path)
    embedding_cache._stores.clear()  # a second process: it only has the files
    other = SpyEncoder()
    encode_cached(other, ["two", "three"], root=tmp_path)
    assert other.batches == [["three"]]
    # The first process's store (re-created here) picks up the shard the "other process" wrote.
    embedding_cache._stores.clear()
    encode_cached(spy, ["three", "one"], root=tmp_path)
    assert spy.batches == [["one", "two"]]
    directory = cache_directory(spy, root=tmp_path)
    assert len(list(directory.glob("*.vectors.npy"))) == len(list(directory.glob("*.keys.npy"))) == 2
    assert not list(directory.glob(".*.tmp"))


def test_model_revision_and_prompt_get_their_own_folders(tmp_path):
    spy = SpyEncoder()
    encode_cached(spy, ["t"], root=tmp_path)
    encode_cached(spy, ["t"], root=tmp_path, prompt_name="query")
    changed = SpyEncoder(revision="s" * 64)
    encode_cached(changed, ["t"], root=tmp_path)
    assert spy.batches == [["t"], ["t"]] and changed.batches == [["t"]]
    folders = {p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*/*")}
    assert folders == {
        "spy_model--rrrrrrrrrrrrrrrr/no-prompt",
        "spy_model--rrrrrrrrrrrrrrrr/prompt-query",
        "spy_model--ssssssssssssssss/no-prompt",
    }


def test_shards_are_plain_numpy_files(tmp_path):
    spy = SpyEncoder()
    encode_cached(spy, ["alpha", "beta"], root=tmp_path)
    directory = cache_directory(spy, root=tmp_path)
    vectors = np.load(next(directory.glob("*.vectors.npy")), allow_pickle=False)
    keys = np.load(next(directory.glob("*.keys.npy")), allow_pickle=False)
    assert vectors.shape == (2, 4) and keys.dtype == np.dtype("S64")
    assert (directory / "meta.json").read_text().startswith('{"model_id": "spy/model"')


def test_wrong_number_of_vectors_is_refused(tmp_path):
    spy = SpyEncoder()
    spy.encode = lambda texts, **kwargs: np.zeros((1, 4), dtype=np.float32)
    with pytest.raises(EncoderError, match="returned 1 vectors for 2 texts"):
        encode_cached(spy, ["a", "b"], root=tmp_path)


def test_default_root_is_the_configured_cache_dir(settings, tmp_path):
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    assert cache_directory(SpyEncoder()).parent.parent == tmp_path / "embeddings"
