"""The on-disk embedding cache, with a spy encoder that records what it is asked to encode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from core.hashing import sha256_text
from evaluation import embedding_cache, embedding_storage
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
    assert spy.batches == [["ccc", "bb", "a"]]  # longest first: batches of similar lengths
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


# --- one cache for several hosts -----------------------------------------------------------------


def test_caches_written_in_the_original_layout_are_read_without_encoding(tmp_path):
    # The layout every earlier version wrote: meta.json and <shard>.keys.npy / .vectors.npy pairs.
    spy = SpyEncoder()
    directory = cache_directory(spy, root=tmp_path)
    directory.mkdir(parents=True)
    (directory / "meta.json").write_text('{"model_id": "spy/model", "revision": "rrrr", "prompt_name": null, "dim": 4}')
    keys = np.array([sha256_text(t).encode("ascii") for t in ("old", "older")], dtype="S64")
    np.save(directory / "123-abc.keys.npy", keys)
    np.save(directory / "123-abc.vectors.npy", np.arange(8, dtype=np.float32).reshape(2, 4))
    vectors = encode_cached(spy, ["older", "old"], root=tmp_path)
    assert spy.batches == []
    np.testing.assert_array_equal(vectors, [[4, 5, 6, 7], [0, 1, 2, 3]])


def test_object_storage_url_goes_through_fsspec(tmp_path):
    url = f"memory://shiftlab-test-{uuid.uuid4().hex}/embeddings"
    spy = SpyEncoder()
    first = encode_cached(spy, ["a", "bb"], root=url)
    embedding_cache._stores.clear()  # another host: it only has the objects
    other = SpyEncoder()
    np.testing.assert_array_equal(encode_cached(other, ["bb", "a"], root=url), first[[1, 0]])
    assert other.batches == []
    storage = embedding_storage.cache_storage(url)
    assert isinstance(storage, embedding_storage.FsspecStorage)
    folder = storage.join(storage.root, "spy_model--rrrrrrrrrrrrrrrr", "no-prompt")
    names = storage.list(folder)
    assert "meta.json" in names and sum(n.endswith(".vectors.npy") for n in names) == 1
    assert storage.list(storage.join(folder, "claims")) == []  # released after encoding


def test_an_unknown_protocol_is_an_actionable_error():
    with pytest.raises(EncoderError, match="install the fsspec package"):
        encode_cached(SpyEncoder(), ["a"], root="nosuchprotocol://bucket/cache")


def _claim_by_another_host(directory, texts, *, expires_in: float) -> Path:
    claims = directory / "claims"
    claims.mkdir(parents=True, exist_ok=True)
    path = claims / f"{time.time_ns() - 10**9:020d}-otherhost-1-abcdef12.json"
    keys = [sha256_text(t) for t in texts]
    path.write_text(json.dumps({"expires": time.time() + expires_in, "keys": keys}))
    return path


def test_texts_another_host_is_encoding_are_waited_for_not_encoded(tmp_path, settings):
    spy, other = SpyEncoder(), SpyEncoder()
    directory = cache_directory(spy, root=tmp_path)
    claim = _claim_by_another_host(directory, ["shared"], expires_in=60)

    def other_host_finishes():
        time.sleep(0.5)
        store = embedding_cache.EmbeddingStore(embedding_storage.LocalStorage(str(tmp_path)), str(directory))
        store.add([sha256_text("shared").encode("ascii")], other.encode(["shared"]), meta={"model_id": "spy/model"})
        claim.unlink()

    finisher = threading.Thread(target=other_host_finishes)
    finisher.start()
    vectors = encode_cached(spy, ["mine", "shared"], root=tmp_path)
    finisher.join()
    assert spy.batches == [["mine"]] and other.batches == [["shared"]]
    np.testing.assert_array_equal(vectors[1], other.encode(["shared"])[0])


def test_texts_stored_and_released_between_our_look_and_our_claim_are_not_encoded(tmp_path, monkeypatch):
    # The race CI once hit: another host stores its last texts and releases its claim after this
    # host listed what is missing but before this host's claim looked at the live claims.
    spy, other = SpyEncoder(), SpyEncoder()
    directory = cache_directory(spy, root=tmp_path)
    real_claim = embedding_cache.EmbeddingStore.claim

    def other_host_finishes_first(store, keys, *, seconds):
        neighbour = embedding_cache.EmbeddingStore(embedding_storage.LocalStorage(str(tmp_path)), str(directory))
        done = [sha256_text(text).encode("ascii") for text in ("aa", "bbb")]
        neighbour.add(done, other.encode(["aa", "bbb"]), meta={"model_id": "spy/model"})
        return real_claim(store, keys, seconds=seconds)

    monkeypatch.setattr(embedding_cache.EmbeddingStore, "claim", other_host_finishes_first)
    vectors = encode_cached(spy, ["aa", "bbb", "c"], root=tmp_path)
    assert spy.batches == [["c"]]
    np.testing.assert_array_equal(vectors[:2], other.encode(["aa", "bbb"]))


def test_a_host_that_sees_a_younger_claim_on_its_texts_encodes_from_the_other_end(tmp_path, monkeypatch):
    # The younger host listed the claims before ours appeared: it encodes longest first and stops
    # after its current request once it sees ours, so we start with the shortest texts.
    monkeypatch.setattr(embedding_cache, "FIRST_CHUNK", 2)
    spy = SpyEncoder()
    texts = ["a" * n for n in range(1, 7)]
    claims = cache_directory(spy, root=tmp_path) / "claims"
    claims.mkdir(parents=True)
    younger = claims / f"{time.time_ns() + 10**12:020d}-otherhost-1-abcdef12.json"
    younger.write_text(json.dumps({"expires": time.time() + 60, "keys": [sha256_text(t) for t in texts]}))
    encode_cached(spy, texts, root=tmp_path)
    assert spy.batches[0] == ["a", "aa"]
    assert sorted(sum(spy.batches, []), key=len) == texts


def test_texts_of_a_host_that_died_are_taken_over_when_its_claim_expires(tmp_path):
    spy = SpyEncoder()
    directory = cache_directory(spy, root=tmp_path)
    _claim_by_another_host(directory, ["orphan"], expires_in=0.6)
    _claim_by_another_host(directory, ["long dead"], expires_in=-3600)
    started = time.monotonic()
    encode_cached(spy, ["orphan", "long dead"], root=tmp_path)
    assert time.monotonic() - started >= 0.5
    assert sorted(map(sorted, spy.batches)) == [["long dead"], ["orphan"]]
    assert embedding_cache.compact_cache(tmp_path).claims_removed == 2


CHILD = r"""
import json, sys, time
from pathlib import Path
import numpy as np
from core.hashing import sha256_text
from evaluation import embedding_cache

embedding_cache.FIRST_CHUNK, embedding_cache.ENCODE_CHUNK = 20, 40
root, go, out = sys.argv[1:4]


class Slow:
    model_id, revision, prompts, similarity_fn_name = "spy/model", "r" * 64, {}, "cosine"
    encoded = []

    def encode(self, texts, *, batch_size=None, prompt_name=None):
        self.encoded.extend(texts)
        time.sleep(0.004 * len(texts))
        return np.array([[len(t), sum(map(ord, t)) % 997, ord(t[-1]), 1] for t in texts], dtype=np.float32)


texts = [f"text {i} " + "x" * (i % 37) for i in range(300)]
while not Path(go).exists():
    time.sleep(0.001)
vectors = embedding_cache.encode_cached(Slow(), texts, root=root)
Path(out).write_text(json.dumps({"encoded": Slow.encoded, "vectors": vectors.tolist()}))
"""


def test_two_processes_encoding_the_same_texts_at_once_encode_each_once(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "shiftlab.settings"}
    go = tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path / "cache"), str(go), str(tmp_path / f"out{n}.json")],
            cwd=Path(__file__).resolve().parent.parent,
            env=env,
        )
        for n in range(2)
    ]
    time.sleep(3)  # both imported and polling for the start signal
    go.touch()
    assert [child.wait(timeout=120) for child in children] == [0, 0]
    outs = [json.loads((tmp_path / f"out{n}.json").read_text()) for n in range(2)]
    encoded = outs[0]["encoded"] + outs[1]["encoded"]
    assert set(encoded) == {f"text {i} " + "x" * (i % 37) for i in range(300)}
    # Only a simultaneous claim can be encoded twice: at most the one request (20, then 40 texts)
    # the younger process has in flight when the older claim appears.
    assert len(encoded) - 300 <= 40, (len(outs[0]["encoded"]), len(outs[1]["encoded"]))
    assert outs[0]["vectors"] == outs[1]["vectors"]


def test_compaction_merges_small_shards_and_lookups_still_hit(tmp_path):
    spy = SpyEncoder()
    texts = [f"t{i}" for i in range(30)]
    for start in range(0, 30, 3):
        encode_cached(spy, texts[start : start + 3], root=tmp_path)
    before = encode_cached(spy, texts, root=tmp_path)
    directory = cache_directory(spy, root=tmp_path)
    assert len(list(directory.glob("*.vectors.npy"))) == 10

    result = embedding_cache.compact_cache(tmp_path, small_rows=100)
    assert (result.folders, result.shards_merged, result.shards_written, result.rows) == (1, 10, 1, 30)
    assert len(list(directory.glob("*.vectors.npy"))) == len(list(directory.glob("*.keys.npy"))) == 1
    # The process that indexed the small shards before compaction, and a fresh one, both still hit.
    np.testing.assert_array_equal(encode_cached(spy, texts, root=tmp_path), before)
    embedding_cache._stores.clear()
    np.testing.assert_array_equal(encode_cached(spy, texts, root=tmp_path), before)
    assert len(spy.batches) == 10


def test_compaction_is_safe_for_a_concurrent_reader(tmp_path):
    spy = SpyEncoder()
    texts = [f"r{i}" for i in range(40)]
    for start in range(0, 40, 2):
        encode_cached(spy, texts[start : start + 2], root=tmp_path)
    expected = encode_cached(spy, texts, root=tmp_path)
    encoded_before = len(spy.batches)
    failures, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            embedding_cache._stores.clear()  # a new reader each time: it lists shards mid-compaction
            try:
                np.testing.assert_array_equal(encode_cached(spy, texts, root=tmp_path), expected)
            except Exception as exc:  # collected and reported by the test
                failures.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    for _ in range(5):
        for start in range(0, 40, 2):  # small shards again, so each round has work to merge
            store = embedding_cache.EmbeddingStore(
                embedding_storage.LocalStorage(str(tmp_path)), str(cache_directory(spy, root=tmp_path))
            )
            store.add(
                [sha256_text(t).encode("ascii") for t in texts[start : start + 2]], expected[start : start + 2], meta={}
            )
        embedding_cache.compact_cache(tmp_path, small_rows=100)
    stop.set()
    thread.join()
    assert failures == [] and len(spy.batches) == encoded_before
