"""Read and check an uploaded dataset in a child process under a memory ceiling (pure module: no
Django; the child runs ``python -m corpora.bounded_import``).

The readers refuse what passes the :class:`corpora.limits.ReadLimits` before it becomes Python
objects, but rows within every bound still cost memory, and a reader (pyarrow) may itself allocate
what a file claims. An import job therefore reads and parses its files in a child process that
caps its own memory first: ``RLIMIT_DATA`` (on Linux 4.7 and later: the heap and every private
writable mapping, which is where Python's and Arrow's allocations live) is set to what the child
already uses plus ``memory_bytes``. A file that needs more makes an allocation in the child fail
(a ``MemoryError`` it reports) or gets the child killed; either way the job fails with a message
naming the ceiling, and the worker, its other tasks and the host carry on.

The child answers with JSON (never pickle: what it decoded came from an untrusted file).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import ShiftlabError, TooLargeError
from corpora.limits import ReadLimits, size_text
from corpora.parsing import OPTION_NAMES, ParsedDataset, parse_tables
from corpora.readers import read_source
from corpora.rows import DatasetFormatError, ParsedItem, Problem
from corpora.task_types import TaskType

logger = logging.getLogger(__name__)
PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The child's exit status when it could not even report running out of memory.
_EXIT_NO_MEMORY = 3


class ImportMemoryError(TooLargeError):
    """Reading and checking the files needed more memory than an import may use."""


@dataclass(frozen=True)
class ChildRead:
    """What the child reads and how: the arguments of ``read_source`` and ``parse_tables``."""

    source: str
    task: str
    label: str | None
    limits: ReadLimits
    language: str = "en"
    fmt: str | None = None
    columns: Sequence[str] | None = None
    split: str | None = None
    field_map: Mapping[str, str] | None = None
    interface: str = "command"

    def as_json(self, memory_bytes: int, cpu_seconds: int | None = None) -> bytes:
        return json.dumps(
            {
                "source": self.source,
                "task": self.task,
                "label": self.label,
                "limits": self.limits.as_dict(),
                "language": self.language,
                "fmt": self.fmt,
                "columns": list(self.columns) if self.columns else None,
                "split": self.split,
                "field_map": dict(self.field_map) if self.field_map else None,
                "interface": self.interface,
                "memory_bytes": memory_bytes,
                "cpu_seconds": cpu_seconds,
            }
        ).encode()


def parse_in_child(
    read: ChildRead, *, memory_bytes: int, timeout_s: float | None = None, cpu_seconds: int | None = None
) -> ParsedDataset:
    """Read and parse ``read`` in a child process that may use ``memory_bytes`` more than it needs
    to start, and ``cpu_seconds`` of processor time (None: no cap). Raises ``DatasetFormatError``
    for the file's problems, ``ImportMemoryError`` when the child ran out of memory or processor
    time or was killed, ``RuntimeError`` when it failed for another reason.

    The processor-time cap is there because a child out of memory does not always fail at once:
    seen once in CI, an allocation failing inside the interpreter was retried in a loop (failing
    ``mmap`` and ``brk`` calls, 100% of a core for minutes); ``RLIMIT_CPU`` then ends it."""
    command = [sys.executable, "-m", "corpora.bounded_import"]
    path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    try:
        completed = subprocess.run(
            command,
            input=read.as_json(memory_bytes, cpu_seconds),
            capture_output=True,
            cwd=PROJECT_ROOT,
            env={**os.environ, "PYTHONPATH": path},
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise TooLargeError(
            f"{_name(read)}: reading and checking the data took longer than {timeout_s:.0f} s: split it into "
            "smaller files."
        ) from None
    if completed.returncode == 0:
        try:
            answer = json.loads(completed.stdout)
        except ValueError:
            answer = None
        if isinstance(answer, dict):
            return _answer(answer, read, memory_bytes)
    if completed.returncode == _EXIT_NO_MEMORY or completed.returncode < 0:
        if completed.returncode < 0:
            logger.warning(
                "import reader for %s was killed by signal %s", _name(read), signal.Signals(-completed.returncode).name
            )
        raise _memory_error(read, memory_bytes, cpu_seconds if completed.returncode == -signal.SIGXCPU else None)
    stderr = completed.stderr.decode("utf-8", "replace")[-4000:]
    raise RuntimeError(f"the import's reader process failed (exit status {completed.returncode}):\n{stderr}")


def _answer(answer: dict[str, Any], read: ChildRead, memory_bytes: int) -> ParsedDataset:
    if "parsed" in answer:
        parsed = answer["parsed"]
        items = [ParsedItem(*fields) for fields in parsed["items"]]
        return ParsedDataset(TaskType(parsed["task"]), items, parsed["metadata"])
    if "problems" in answer:
        problems = [Problem(source, line, message) for source, line, message in answer["problems"]]
        raise DatasetFormatError(problems, answer["total"])
    if "error" in answer:
        raise ShiftlabError(answer["error"])
    if answer.get("memory"):
        raise _memory_error(read, memory_bytes)
    raise RuntimeError(f"the import's reader process answered {sorted(answer)}")


def _memory_error(read: ChildRead, memory_bytes: int, cpu_seconds: int | None = None) -> ImportMemoryError:
    cpu = f" or more than {cpu_seconds} s of processor time (SHIFTLAB_IMPORT_CPU_S)" if cpu_seconds else ""
    return ImportMemoryError(
        f"{_name(read)}: reading and checking the data needs more than the {size_text(memory_bytes)} of memory "
        f"an import may use (SHIFTLAB_IMPORT_MEMORY_MB){cpu}: split it into smaller files, or ask an administrator "
        "to raise SHIFTLAB_IMPORT_MEMORY_MB if the server has the memory."
    )


def _name(read: ChildRead) -> str:
    return read.label or (Path(read.source).name if read.label is None else "the upload")


# --- the child ------------------------------------------------------------------------------------


def _bound_memory(extra_bytes: int) -> None:
    """Cap this process's private writable memory at what it has now plus ``extra_bytes``."""
    data_now = 0
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmData:"):
                    data_now = int(line.split()[1]) * 1024
    except OSError:  # not Linux: the limit below is set, and not enforced there
        pass
    limit = data_now + extra_bytes
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _holds_parquet(source: Path, fmt: str | None) -> bool:
    if fmt == "parquet":
        return True
    if source.is_dir():
        return any(child.suffix.lower() == ".parquet" for child in source.iterdir())
    return source.suffix.lower() == ".parquet"


def _read_and_parse(request: dict[str, Any]) -> ParsedDataset:
    limits = request["limits"]
    tables = read_source(
        request["source"],
        fmt=request["fmt"],
        columns=request["columns"],
        split=request["split"],
        option_names=OPTION_NAMES[request["interface"]],
        limits=ReadLimits(**limits),
        label=request["label"],
    )
    return parse_tables(
        tables,
        task=request["task"],
        language=request["language"],
        split=request["split"],
        field_map=request["field_map"],
        option_names=OPTION_NAMES[request["interface"]],
    )


def _parsed_json(parsed: ParsedDataset) -> dict[str, Any]:
    items = [
        [item.split, item.kind, item.item_id, item.payload, item.gold, item.language, item.text_hashes]
        for item in parsed.items
    ]
    return {"task": parsed.task.value, "items": items, "metadata": parsed.metadata}


def main() -> int:
    request = json.loads(sys.stdin.buffer.read())
    if _holds_parquet(Path(request["source"]), request["fmt"]):
        import pyarrow.parquet  # noqa: F401 (loaded before the cap: the library's own size is not the file's)
    _bound_memory(int(request["memory_bytes"]))
    if request.get("cpu_seconds"):
        seconds = int(request["cpu_seconds"])
        # SIGXCPU at the soft limit (the parent names it); SIGKILL at the hard one if that is caught.
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
    try:
        try:
            answer: dict[str, Any] = {"parsed": _parsed_json(_read_and_parse(request))}
        except DatasetFormatError as exc:
            answer = {"problems": [[p.source, p.line, p.message] for p in exc.problems], "total": exc.total}
        except ShiftlabError as exc:
            answer = {"error": str(exc)}
        except MemoryError:
            answer = {"memory": True}
        data = json.dumps(answer, default=str).encode()
    except MemoryError:
        return _EXIT_NO_MEMORY
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except MemoryError:
        return _EXIT_NO_MEMORY
    return 0


if __name__ == "__main__":
    os._exit(main())  # skip the interpreter's teardown of what may be gigabytes of objects
