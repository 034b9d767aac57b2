"""Fuzzed dataset uploads: hypothesis builds CSV, JSONL, Parquet and BEIR inputs that are plausible,
odd (mixed types, control and line-separator characters, duplicate ids, missing columns) or
damaged (truncated, bytes inserted or overwritten), and sends each through the upload path (files
stored, import job run). Every input either imports completely or fails the job with the
project's clear error, and leaves nothing behind: no dataset, no items, no stored upload."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from corpora.models import Dataset, DatasetImport, DatasetItem
from corpora.services import ImportOptions, dataset_import_job_create, dataset_import_job_run

pytestmark = pytest.mark.django_db
# 80 examples a format: about 15 s for the file on a busy two-core machine.
FUZZ = hypothesis_settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
_names = (f"fuzz-{n}" for n in itertools.count())


@pytest.fixture(autouse=True)
def _read_in_the_worker(settings):
    """Jobs read in this process (SHIFTLAB_IMPORT_MEMORY_MB=0): a child process per example would
    make this file ten times slower. tests/test_import_bombs.py checks that a job's child reads
    these formats, and fails on them, exactly as the worker does."""
    settings.DATASET_IMPORT_MEMORY_MB = 0


# Texts with what breaks naive readers: quotes, separators, newlines, U+2028/U+0085, NUL, emoji.
text = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
        st.sampled_from(['"', ",", "\t", "\n", "\r", "\u2028", "\u0085", "\x00", "\ufeff", "é", "😀"]),
    ),
    max_size=40,
)
# A text no importer may refuse for being blank.
words = st.builds(lambda t: "w" + t, text)
cell = st.one_of(text, st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True), st.none(), st.booleans())
STS_COLUMNS = ["id", "sentence1", "sentence2", "score", "split", "language"]
PAIR_KEYS = ["id", "sentence1", "sentence2", "label", "split", "language"]


@st.composite
def damaged(draw, data: bytes) -> bytes:
    """``data`` unchanged, truncated, or with bytes inserted or overwritten."""
    how = draw(st.sampled_from(["keep", "keep", "truncate", "insert", "overwrite"]))
    if how == "keep" or not data:
        return data
    at = draw(st.integers(0, len(data)))
    if how == "truncate":
        return data[:at]
    noise = draw(st.binary(min_size=1, max_size=8))
    return data[:at] + noise + data[at + (len(noise) if how == "overwrite" else 0) :]


@st.composite
def csv_file(draw) -> tuple[bytes, str]:
    if draw(st.booleans()):  # a well-formed STS file, with awkward texts
        columns = STS_COLUMNS[:4]
        n = draw(st.integers(1, 8))
        rows = [[f"r{i}", draw(words), draw(words), draw(st.floats(0, 5))] for i in range(n)]
    else:
        columns = draw(st.lists(st.sampled_from([*STS_COLUMNS, "extra"]), min_size=1, max_size=7))
        rows = draw(st.lists(st.lists(cell, min_size=len(columns), max_size=len(columns) + 1), max_size=8))
    out = io.StringIO()
    out.write(",".join(columns) + "\n")
    for row in rows:
        out.write(",".join(_csv_field(value) for value in row) + "\n")
    return draw(damaged(out.getvalue().encode("utf-8"))), "data.csv"


def _csv_field(value) -> str:
    raw = "" if value is None else str(value)
    return '"' + raw.replace('"', '""') + '"' if any(c in raw for c in ',"\n\r') else raw


@st.composite
def jsonl_file(draw) -> tuple[bytes, str]:
    pair = st.fixed_dictionaries(
        {"id": st.uuids().map(str), "sentence1": words, "sentence2": words, "label": st.sampled_from([0, 1])}
    )
    odd = st.one_of(
        st.dictionaries(st.sampled_from([*PAIR_KEYS, "other"]), cell, max_size=7),
        st.fixed_dictionaries(
            {"id": text, "sentence1": text, "sentence2": text, "label": st.sampled_from([0, 1, 2, "1", None])}
        ),
        pair,
        cell,
        st.lists(cell, max_size=3),
    )
    # Half the files are well-formed pairs (with awkward texts), half a mixture of odd lines.
    rows = draw(st.lists(pair, min_size=1, max_size=8) if draw(st.booleans()) else st.lists(odd, max_size=8))
    body = "\n".join(json.dumps(row, ensure_ascii=draw(st.booleans())) for row in rows)
    return draw(damaged(body.encode("utf-8"))), "data.jsonl"


@st.composite
def parquet_file(draw) -> tuple[bytes, str]:
    n = draw(st.integers(0, 6))
    if draw(st.booleans()):  # well-formed pairs, with awkward texts
        table = pa.table(
            {
                "id": [f"p{i}" for i in range(n)],
                "sentence1": draw(st.lists(words, min_size=n, max_size=n)),
                "sentence2": draw(st.lists(words, min_size=n, max_size=n)),
                "label": draw(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n)),
            }
        )
    else:
        columns = draw(st.lists(st.sampled_from(PAIR_KEYS), min_size=1, max_size=6, unique=True))
        values = {
            "text": st.one_of(st.none(), text),
            "int": st.one_of(st.none(), st.integers(-3, 3)),
            "float": st.floats(allow_nan=True),
            "list": st.lists(st.integers(0, 3), max_size=3),
        }
        table = pa.table(
            {
                name: draw(st.lists(values[draw(st.sampled_from(sorted(values)))], min_size=n, max_size=n))
                for name in columns
            }
        )
    out = io.BytesIO()
    pq.write_table(table, out)
    return draw(damaged(out.getvalue())), "data.parquet"


@st.composite
def beir_files(draw) -> list[tuple[bytes, str]]:
    valid = draw(st.booleans())  # every id unique and every qrels line pointing at known ids
    ids = st.sampled_from(["d1", "d2", "d3"] if valid else ["d1", "d2", "d3", ""])
    doc_ids = draw(st.lists(ids, min_size=1 if valid else 0, max_size=4, unique=valid))
    query_ids = draw(
        st.lists(st.sampled_from(["q1", "q2", "q3"]), min_size=1 if valid else 0, max_size=3, unique=valid)
    )
    texts = words if valid else text
    corpus = "\n".join(json.dumps({"_id": d, "title": draw(text), "text": draw(texts)}) for d in doc_ids)
    queries = "\n".join(json.dumps({"_id": q, "text": draw(texts)}) for q in query_ids)
    if valid:
        pairs = draw(st.lists(st.tuples(st.sampled_from(query_ids), st.sampled_from(doc_ids)), min_size=1, max_size=5))
        scores = st.sampled_from(["1", "2"])
    else:
        pairs = draw(
            st.lists(st.tuples(st.sampled_from(["q1", "q2", "q4"]), st.sampled_from(["d1", "d2", "d9"])), max_size=5)
        )
        scores = st.sampled_from(["1", "0", "2", "x", "", "1.5"])
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{draw(scores)}\n" for q, d in pairs)
    return [
        (draw(damaged(corpus.encode())), "corpus.jsonl"),
        (draw(damaged(queries.encode())), "queries.jsonl"),
        (draw(damaged(qrels.encode())), "test.tsv"),
    ]


def _import_leaves_no_trace_on_failure(files: list[tuple[bytes, str]], task: str) -> None:
    uploads = [SimpleUploadedFile(name, data) for data, name in files]
    name = next(_names)
    items_before, stored_before = DatasetItem.objects.count(), _stored_uploads()
    job = dataset_import_job_create(
        actor=None, project=None, files=uploads, task=task, name=name, options=ImportOptions()
    )
    job = dataset_import_job_run(job_id=job.pk)
    event(job.status)
    assert not Path(job.upload_dir).exists() and _stored_uploads() == stored_before
    if job.status == DatasetImport.Status.SUCCEEDED:
        dataset = Dataset.objects.get(name=name)
        assert job.error == "" and job.dataset_id == dataset.pk
        assert dataset.items.count() == dataset.n_items
        dataset.delete()
    else:
        assert job.status == DatasetImport.Status.FAILED and job.error.strip()
        assert "Internal error" not in job.error
        assert not Dataset.objects.filter(name=name).exists()
    assert DatasetItem.objects.count() == items_before


def _stored_uploads() -> set[Path]:
    folder = Path(settings.MEDIA_ROOT) / "imports"
    return set(folder.iterdir()) if folder.exists() else set()


@FUZZ
@given(upload=csv_file())
def test_fuzzed_csv(upload):
    _import_leaves_no_trace_on_failure([upload], "sts")


@FUZZ
@given(upload=jsonl_file())
def test_fuzzed_jsonl(upload):
    _import_leaves_no_trace_on_failure([upload], "pair_classification")


@FUZZ
@given(upload=parquet_file())
def test_fuzzed_parquet(upload):
    _import_leaves_no_trace_on_failure([upload], "pair_classification")


@FUZZ
@given(uploads=beir_files())
def test_fuzzed_beir(uploads):
    _import_leaves_no_trace_on_failure(uploads, "retrieval")


def test_a_failure_quoting_a_nul_byte_is_stored_on_every_database():
    """Found by test_fuzzed_csv on PostgreSQL: a header repeating a column whose name holds a NUL
    byte failed the import with a message quoting it, which PostgreSQL text cannot hold, so the job
    itself could not be saved. The message keeps the byte as ``\\x00``."""
    upload = SimpleUploadedFile("data.csv", b"id\x00,id\x00,sentence1,sentence2,score\n1,2,a,b,3\n")
    job = dataset_import_job_create(
        actor=None, project=None, files=[upload], task="sts", name="nul-header", options=ImportOptions()
    )
    job = dataset_import_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == DatasetImport.Status.FAILED and "\x00" not in job.error and "\\x00" in job.error
    assert not Dataset.objects.filter(name="nul-header").exists()
