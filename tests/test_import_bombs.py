"""Uploads never decode past a bound (issue 39, finding 1): dictionary, run-length and compressed
Parquet bombs, a CSV with one huge cell, a JSON Lines row over the row limit and control pool bombs
are refused with a message naming the row, the column and the limit, before the data become Python
objects; an import job reads in a child process under a memory ceiling, so a file that needs more
costs a clear refusal and the worker lives on. Messages name the user's file, never a server path.

The bombs are read in a forked child whose memory is capped (``_capped``): a reader that did
materialise them fails there, with a MemoryError, instead of taking this machine's memory."""

from __future__ import annotations

import json
import os
import resource
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.studies.control_pool import MAX_POOL_BYTES, control_pool_from_upload
from corpora.limits import ReadLimits
from corpora.models import Dataset, DatasetImport, DatasetItem
from corpora.readers import read_source
from corpora.rows import DatasetFormatError
from corpora.services import ImportOptions, dataset_import, dataset_import_job_create, dataset_import_job_run

MB = 2**20
KB = 2**10
FIXTURES = settings.BASE_DIR / "fixtures"


def _vm_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def _capped(work: Callable[[], object], *, memory_mb: int = 256) -> tuple[str, str, float]:
    """``work()`` in a forked child that may grow its private memory by ``memory_mb`` at most:
    ("ok", repr of the result) or ("refused", the DatasetFormatError's text) or ("raised", the
    error), and how many MB its resident memory grew at its peak."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read_end)
        try:
            limit = _vm_kb("VmData") * KB + memory_mb * MB
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
            with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
                refs.write("5")  # the peak resident size starts again from here
            start = _vm_kb("VmHWM")
            try:
                outcome = ("ok", repr(work())[:2000])
            except DatasetFormatError as exc:
                outcome = ("refused", str(exc))
            except BaseException as exc:  # noqa: BLE001 - reported to the parent as a result
                outcome = ("raised", f"{type(exc).__name__}: {exc}"[:2000])
            payload = json.dumps([*outcome, (_vm_kb("VmHWM") - start) / 1024]).encode()
        except BaseException as exc:  # noqa: BLE001
            payload = json.dumps(["raised", f"{type(exc).__name__}: {exc}"[:2000], 0.0]).encode()
        with os.fdopen(write_end, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as incoming:
        data = incoming.read()
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"the reader died with signal {os.WTERMSIG(status)}"
    kind, text, grew = json.loads(data)
    return kind, text, grew


@contextmanager
def _memory_cap(memory_mb: int) -> Iterator[None]:
    """Let this process's private memory grow by ``memory_mb`` at most for a while (a test that
    reads a bomb where a reader could materialise it must not take the machine's memory)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (_vm_kb("VmData") * KB + memory_mb * MB, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def _dictionary_bomb(path: Path, *, rows: int, value_bytes: int) -> None:
    """One text of ``value_bytes`` stored once in a dictionary page, referenced by every row (the
    indices run-length encoded): a few kilobytes that claim ``rows * value_bytes``. Written without
    the Arrow schema, so it reads back as a plain text column, as any other writer's file would."""
    indices = pa.array(np.zeros(rows, dtype=np.int32))
    text = pa.DictionaryArray.from_arrays(indices, pa.array(["x" * value_bytes]))
    pq.write_table(pa.table({"text": text}), path, store_schema=False)


# --- Parquet bombs, at the reader ---------------------------------------------------------------


def test_a_dictionary_bomb_is_refused_by_its_cell_size_before_decoding(tmp_path):
    path = tmp_path / "bomb.parquet"
    _dictionary_bomb(path, rows=200_000, value_bytes=MB)  # 195 GiB decoded
    assert path.stat().st_size < 100 * KB
    limits = ReadLimits(max_cell_bytes=256 * KB, max_row_bytes=MB, max_total_bytes=64 * MB)
    kind, message, grew = _capped(lambda: read_source(path, limits=limits, label="bomb.parquet"))
    assert kind == "refused", message
    assert message.startswith(
        "bomb.parquet, line 1: the value of column 'text' decodes to 1 MB, over the 256 KB limit per cell: "
    )
    assert "SHIFTLAB_MAX_CELL_KB" in message
    assert grew < 64, f"the reader's memory grew by {grew:.0f} MB"


def test_a_dictionary_bomb_of_allowed_cells_is_refused_by_its_total_before_decoding(tmp_path):
    path = tmp_path / "bomb.parquet"
    _dictionary_bomb(path, rows=200_000, value_bytes=MB)
    # Every cell is within its bound: the batch's total passes the read's before any value is decoded.
    limits = ReadLimits(max_cell_bytes=2 * MB, max_row_bytes=2 * MB, max_total_bytes=64 * MB)
    kind, message, grew = _capped(lambda: read_source(path, limits=limits, label="bomb.parquet"))
    assert kind == "refused", message
    assert message.startswith("bomb.parquet, line 65: the data decode to more than 64 MB by this row")
    assert "SHIFTLAB_MAX_UNCOMPRESSED_MB" in message
    assert grew < 64, f"the reader's memory grew by {grew:.0f} MB"


def test_a_dictionary_bomb_inside_lists_is_refused(tmp_path):
    # Reranking files hold lists of texts: the dictionary of a list's items counts per use too.
    rows = 100_000
    items = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["y" * MB]))
    lists = pa.ListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32)), items)
    path = tmp_path / "lists.parquet"
    pq.write_table(pa.table({"query": ["q"] * rows, "positive": lists}), path, store_schema=False)
    limits = ReadLimits(max_cell_bytes=512 * KB, max_total_bytes=64 * MB)
    kind, message, grew = _capped(lambda: read_source(path, limits=limits, label="lists.parquet"))
    assert kind == "refused", message
    assert "line 1: the value of column 'positive' decodes to 1 MB, over the 512 KB limit per cell" in message
    assert grew < 64, f"the reader's memory grew by {grew:.0f} MB"


def test_a_run_length_bomb_of_empty_rows_is_refused_by_its_rows(tmp_path):
    path = tmp_path / "rle.parquet"
    pq.write_table(pa.table({"text": pa.nulls(5_000_000, pa.string())}), path)  # definition levels: one run
    assert path.stat().st_size < 10 * KB
    kind, message, _ = _capped(lambda: read_source(path, limits=ReadLimits(max_rows=1_000_000), label="rle.parquet"))
    assert kind == "refused", message
    assert message.startswith("rle.parquet: holds 5000000 rows: more than 1000000 rows, the most one read may hold")
    # Each empty cell still counts 8 bytes: a total bound alone stops it too, within the first batch.
    kind, message, grew = _capped(
        lambda: read_source(path, limits=ReadLimits(max_total_bytes=256 * KB), label="rle.parquet")
    )
    assert kind == "refused" and message.startswith("rle.parquet, line 32769: the data decode to more than 256 KB")
    assert grew < 64, f"the reader's memory grew by {grew:.0f} MB"


def test_a_compressed_page_bomb_is_refused_from_its_metadata(tmp_path):
    # Plain pages of one repeated text, zstd-compressed: 200 MB in a few hundred kilobytes. A page is
    # inflated whole, so the chunk's size in the metadata (more than 200 values within the cell
    # limit could hold) refuses it first.
    path = tmp_path / "zstd.parquet"
    pq.write_table(pa.table({"text": ["z" * MB] * 200}), path, use_dictionary=False, compression="zstd")
    assert path.stat().st_size < MB
    limits = ReadLimits(max_cell_bytes=256 * KB, max_total_bytes=1024 * MB)
    kind, message, grew = _capped(lambda: read_source(path, limits=limits, label="zstd.parquet"))
    assert kind == "refused", message
    assert message.startswith(
        "zstd.parquet: column 'text' holds 200.0 MB in 200 values, so at least one is over the 256 KB limit per cell"
    )
    assert grew < 32, f"the reader's memory grew by {grew:.0f} MB"


def test_one_huge_compressed_value_among_small_ones_is_refused_while_decoding(tmp_path):
    # The chunk could hold its 64 MB within the cell limit: the value is measured once decoded.
    path = tmp_path / "zstd.parquet"
    texts = ["short"] * 999 + ["z" * 64 * MB]
    pq.write_table(pa.table({"text": texts}), path, use_dictionary=False, compression="zstd")
    limits = ReadLimits(max_cell_bytes=256 * KB, max_total_bytes=1024 * MB)
    kind, message, grew = _capped(lambda: read_source(path, limits=limits, label="zstd.parquet"), memory_mb=512)
    assert kind == "refused", message
    assert message.startswith("zstd.parquet, line 1000: the value of column 'text' decodes to 64 MB, over the 256 KB")
    assert grew < 256, f"the reader's memory grew by {grew:.0f} MB"


def test_a_parquet_file_within_the_bounds_reads_every_row(tmp_path):
    path = tmp_path / "pairs.parquet"
    texts = [f"Sentence number {i}." for i in range(70_000)]  # more than one batch
    pq.write_table(pa.table({"sentence1": texts, "sentence2": texts[::-1], "score": [1.5] * 70_000}), path)
    limits = ReadLimits(max_cell_bytes=KB, max_row_bytes=4 * KB, max_total_bytes=64 * MB, max_rows=70_000)
    (table,) = read_source(path, limits=limits)
    assert len(table.rows) == 70_000 and table.rows[-1].line == 70_000
    assert table.rows[-1].fields == {
        "sentence1": "Sentence number 69999.",
        "sentence2": "Sentence number 0.",
        "score": 1.5,
    }


def test_compressed_uploads_are_not_decompressed(tmp_path):
    # No reader takes .gz/.zip files: they are refused by their name, never opened.
    path = tmp_path / "data.csv.gz"
    path.write_bytes(b"\x1f\x8b" + b"\x00" * 100)
    with pytest.raises(DatasetFormatError, match=r"^data\.csv\.gz: cannot tell the format from '\.gz'"):
        read_source(path, label="data.csv.gz")


# --- text files and messages, at the reader -----------------------------------------------------


def test_a_csv_with_one_huge_cell_names_its_row_and_column(tmp_path):
    path = tmp_path / "stsb.csv"
    path.write_text(f"sentence1,sentence2,score\nA cat.,A dog.,1\n{'w' * (2 * MB + 5)},A dog.,2\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError) as exc:
        read_source(path, limits=ReadLimits(max_cell_bytes=MB), label="stsb.csv")
    assert str(exc.value).startswith(
        "stsb.csv, line 3: the value of column 'sentence1' decodes to 2.0 MB, over the 1 MB limit per cell: "
    )


def test_a_csv_record_past_the_row_limit_is_refused_before_the_csv_module_builds_it(tmp_path):
    path = tmp_path / "long.csv"
    path.write_bytes(b"sentence1,sentence2,score\nA cat.,A dog.,1\n" + b"w" * (24 * MB) + b",b,2\n")
    limits = ReadLimits(max_cell_bytes=MB, max_row_bytes=MB)
    kind, message, grew = _capped(lambda: read_source(path, limits=limits, label="long.csv"))
    assert kind == "refused", message
    assert message.startswith("long.csv, line 3: the row decodes to more than 12.0 MB, over the 1 MB limit per row")
    assert grew < 80, f"the reader's memory grew by {grew:.0f} MB"  # the file's bytes and text: 48 MB
    # A quoted value running over many lines is counted across them.
    path.write_text('sentence1,sentence2,score\n"' + "a line of text\n" * 200_000 + '",b,2\n', encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"^long\.csv, line 2: the row decodes to more than 1\.0 MB, over"):
        read_source(path, limits=limits, label="long.csv")


def test_a_json_lines_row_over_the_row_limit_is_refused(tmp_path):
    path = tmp_path / "pairs.jsonl"
    row = {"sentence1": "é" * 40_000, "sentence2": "b" * 60_000, "label": 1}  # 80 KB + 60 KB + 8 bytes
    path.write_text(json.dumps({"sentence1": "a", "sentence2": "b", "label": 0}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DatasetFormatError) as exc:
        read_source(path, limits=ReadLimits(max_cell_bytes=100 * KB, max_row_bytes=128 * KB), label="pairs.jsonl")
    assert str(exc.value).startswith("pairs.jsonl, line 2: the row decodes to 136.7 KB, over the 128 KB limit per row")


def test_a_text_file_over_the_total_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.tsv"
    path.write_bytes(b"a\tb\n" * (MB // 2))
    with pytest.raises(DatasetFormatError, match=r"^big\.tsv: the file has 2 MB: the data decode to more than 1 MB"):
        read_source(path, limits=ReadLimits(max_total_bytes=MB), label="big.tsv")


def test_messages_name_the_label_never_the_server_path(tmp_path):
    broken = tmp_path / "a1b2c3" / "data.parquet"
    broken.parent.mkdir()
    broken.write_bytes(b"PAR1 not really")
    latin = tmp_path / "a1b2c3" / "data.csv"
    latin.write_bytes("sentence1\ncaf\xe9\n".encode("latin-1"))
    for path in (broken, latin):
        with pytest.raises(DatasetFormatError) as exc:
            read_source(path, label=path.name)
        assert str(exc.value).startswith(f"{path.name}, ") or str(exc.value).startswith(f"{path.name}: ")
        assert str(tmp_path) not in str(exc.value)


def test_a_hub_dataset_row_over_the_limits_is_refused(tmp_path):
    # `--format hf` reads what datasets.load_dataset gives (a local folder here: offline).
    from corpora.hub import read_hub

    (tmp_path / "test.csv").write_text(f"sentence1,sentence2,score\na,b,1\n{'h' * (2 * MB)},c,2\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError) as exc:
        read_hub(str(tmp_path), limits=ReadLimits(max_cell_bytes=MB))
    assert str(exc.value) == (
        f"{tmp_path} [test], line 2: the value of column 'sentence1' decodes to 2 MB, over the 1 MB limit per "
        "cell: shorten that value (split a long document into passages), or ask an administrator to raise "
        "SHIFTLAB_MAX_CELL_KB"
    )


# --- control pools ------------------------------------------------------------------------------


def test_a_control_pool_of_tiny_rows_is_refused_by_its_row_count():
    # 9 MB of minimal rows: under the file size limit, but a million Python rows once read.
    data = b"text_a,text_b,kind\n" + b"a,b,easy_negative\n" * 500_000
    assert len(data) < MAX_POOL_BYTES
    kind, message, grew = _capped(lambda: control_pool_from_upload(SimpleUploadedFile("pool.csv", data)))
    assert kind == "refused", message
    assert message.startswith("pool.csv, line 50002: more than 50000 rows, the most one read may hold: ")
    assert "a control pool holds a few hundred short pairs" in message
    assert grew < 128, f"the reader's memory grew by {grew:.0f} MB"


def test_a_control_pool_with_one_huge_text_is_refused():
    text = "Rain fell all night. " * 400_000  # 8 MB
    data = json.dumps({"text_a": text, "text_b": "Dry.", "kind": "easy_negative"}).encode() + b"\n"
    with pytest.raises(DatasetFormatError) as exc:
        control_pool_from_upload(SimpleUploadedFile("pool.jsonl", data))
    assert str(exc.value).startswith(
        "pool.jsonl, line 1: the value of column 'text_a' decodes to 8.0 MB, over the 16 KB limit per cell: "
    )


def test_a_control_pool_upload_error_names_the_upload_not_the_temporary_copy():
    with pytest.raises(DatasetFormatError) as exc:
        control_pool_from_upload(
            SimpleUploadedFile("my-pool.csv", "text_a,text_b,kind\ncaf\xe9,x,y\n".encode("latin-1"))
        )
    assert str(exc.value).startswith("my-pool.csv, line 2: not valid UTF-8")
    assert "control-pool" not in str(exc.value) and "/tmp" not in str(exc.value)


# --- import jobs: the bounds and the memory ceiling ---------------------------------------------


def _run_job(files: list[tuple[str, bytes]], *, task: str = "sts", name: str = "bomb") -> DatasetImport:
    uploads = [SimpleUploadedFile(file_name, data) for file_name, data in files]
    job = dataset_import_job_create(
        actor=None, project=None, files=uploads, task=task, name=name, options=ImportOptions()
    )
    return dataset_import_job_run(job_id=job.pk)


def _refused(job: DatasetImport) -> str:
    assert job.status == DatasetImport.Status.FAILED, job.error
    assert not Dataset.objects.exists() and not DatasetItem.objects.exists()
    assert not Path(job.upload_dir).exists()
    assert str(Path(settings.MEDIA_ROOT)) not in job.error and job.upload_dir not in job.error
    return job.error


@pytest.mark.django_db
def test_an_import_job_refuses_a_parquet_dictionary_bomb(settings, tmp_path):
    settings.DATASET_MAX_CELL_KB = 256
    path = tmp_path / "bomb.parquet"
    _dictionary_bomb(path, rows=200_000, value_bytes=MB)
    with _memory_cap(1024):
        job = _run_job([("bomb.parquet", path.read_bytes())])
    error = _refused(job)
    assert error.startswith("bomb.parquet, line 1: the value of column 'text' decodes to 1 MB, over the 256 KB limit")


@pytest.mark.django_db
def test_an_import_job_refuses_a_csv_cell_over_the_limit(settings):
    settings.DATASET_MAX_CELL_KB = 64
    data = f"sentence1,sentence2,score\nA cat.,{'long ' * 20_000},1\n".encode()
    error = _refused(_run_job([("stsb.csv", data)]))
    assert error.startswith("stsb.csv, line 2: the value of column 'sentence2' decodes to 97.7 KB, over the 64 KB")


@pytest.mark.django_db
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA bounds malloc'd memory on Linux only")
def test_an_import_job_over_the_memory_ceiling_fails_clearly_and_the_worker_lives(settings):
    # Every row is small and the file is 4 MB, but 200,000 rows of Python objects need far more
    # than the 64 MB ceiling: the child reading it stops, and this process carries on.
    settings.DATASET_IMPORT_MEMORY_MB = 64
    settings.DATASET_IMPORT_CPU_S = 30  # a child out of memory can spin; the cap ends it
    rows = "".join(f"Sentence {k}.,Another {k}.,{k % 5}\n" for k in range(200_000))
    error = _refused(_run_job([("many.csv", f"sentence1,sentence2,score\n{rows}".encode())]))
    assert error.startswith(
        "many.csv: reading and checking the data needs more than the 64 MB of memory an import may use "
        "(SHIFTLAB_IMPORT_MEMORY_MB)"
    )
    settings.DATASET_IMPORT_MEMORY_MB = 1024
    job = _run_job([("demo-sts.csv", (FIXTURES / "sts/demo-sts.csv").read_bytes())], name="after")
    assert job.status == DatasetImport.Status.SUCCEEDED and job.dataset.n_items == 40


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


READ_ALIKE = [
    ("sts", [("demo-sts.csv", (FIXTURES / "sts/demo-sts.csv").read_bytes())]),
    (
        "sts",
        [
            (
                "pairs.parquet",
                _parquet_bytes(pa.table({"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [1, 2]})),
            )
        ],
    ),
    (
        "pair_classification",
        [("pairs.jsonl", b'{"sentence1": "caf\\u00e9 \\ud83d\\ude00", "sentence2": "x", "label": 1}\n')],
    ),
    (
        "sts",
        [("train.csv", b"sentence1,sentence2,score\na,b,1\n"), ("test.csv", b"sentence1,sentence2,score\nc,d,2\n")],
    ),
    ("sts", [("broken.parquet", b"PAR1 broken")]),
    ("sts", [("bad.csv", b"sentence1,sentence2,score\na,b,high\n")]),
]


@pytest.mark.django_db
@pytest.mark.parametrize("task,files", READ_ALIKE, ids=[files[0][0] for _, files in READ_ALIKE])
def test_a_job_reads_in_its_child_as_the_worker_would(settings, task, files):
    """The child's answer (JSON) makes the same dataset, or the same message, as reading in the worker."""
    outcomes = []
    for memory_mb in (0, 1024):
        settings.DATASET_IMPORT_MEMORY_MB = memory_mb
        job = _run_job(files, task=task, name=f"alike-{memory_mb}")
        dataset = job.dataset
        outcomes.append((job.status, job.error, dataset and (dataset.content_hash, dataset.n_items, dataset.metadata)))
    assert outcomes[0] == outcomes[1]


@pytest.mark.django_db
def test_a_normal_parquet_file_still_imports(settings, tmp_path):
    dataset = dataset_import(source=FIXTURES / "sts/demo-sts.csv", task="sts", name="csv")
    path = tmp_path / "demo.parquet"
    items = list(dataset.items.order_by("position"))
    pq.write_table(
        pa.table(
            {
                "sentence1": [i.payload["sentence1"] for i in items],
                "sentence2": [i.payload["sentence2"] for i in items],
                "score": [i.gold for i in items],
            }
        ),
        path,
    )
    job = _run_job([("demo.parquet", path.read_bytes())], name="parquet")
    assert job.status == DatasetImport.Status.SUCCEEDED, job.error
    assert job.dataset.n_items == 40


def test_a_child_past_its_processor_time_is_ended_with_the_ceilings_message(tmp_path):
    """The processor-time cap ends a child that cannot finish (a reader out of memory was seen to
    spin instead of failing): here a file that takes seconds to parse, under a 1 s cap."""
    from corpora.bounded_import import ChildRead, ImportMemoryError, parse_in_child
    from corpora.services import import_read_limits

    path = tmp_path / "slow.csv"
    rows = "".join(f"Sentence {k}.,Another {k}.,{k % 5}\n" for k in range(400_000))
    path.write_text(f"sentence1,sentence2,score\n{rows}", encoding="utf-8")
    read = ChildRead(source=str(path), task="sts", label="slow.csv", limits=import_read_limits())
    with pytest.raises(ImportMemoryError, match=r"^slow\.csv: .* or more than 1 s of processor time"):
        parse_in_child(read, memory_bytes=2**31, cpu_seconds=1, timeout_s=120)
