"""A researcher's control pool file: ready-made control pairs accepted when a study is locked.

Format: JSON Lines (``.jsonl``) with one object per line, or CSV/TSV (``.csv``/``.tsv``) with a
header line. Columns:

- ``text_a``, ``text_b`` (required): the two texts, shown as the original and the second text;
- ``kind`` (required): ``easy_positive`` (text B is a meaning-preserving rewrite of text A: never
  only a punctuation or case change) or ``easy_negative`` (text B is unrelated to text A);
- ``language_a``, ``language_b`` (optional, both or neither): language codes of the texts. A
  pair without them counts as same-language and serves any same-language study; a translation
  study's controls need them (``en`` and ``de`` for an en→de study).

Every problem is reported with its line; nothing is used when one is found. A file over
``MAX_POOL_BYTES`` is refused by its size, before it is read (a real pool of a few thousand pairs
is well under 1 MB; a 100 MB upload read whole took 1.2 GB), and reading stops at the first text
over ``POOL_LIMITS``' bounds or past its row count (ten megabytes of one-character rows would
otherwise become millions of Python rows). Messages name the uploaded file, never the temporary
copy the server reads.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from annotation.kinds import ItemKind
from annotation.science.controls import PairCandidate
from annotation.science.text_measures import is_punctuation_edit
from corpora.limits import ReadLimits
from corpora.parsing import DatasetFormatError, Problem, RawRow
from corpora.readers import detect_format, megabytes, read_table

POOL_ORIGIN = "pool"
MAX_POOL_BYTES = 10 * 2**20
COLUMNS = ("text_a", "text_b", "kind", "language_a", "language_b")
_KINDS = (ItemKind.EASY_POSITIVE.value, ItemKind.EASY_NEGATIVE.value)
_SMALLER = "a control pool holds a few hundred short pairs: upload a smaller sample of shorter ones"
POOL_LIMITS = ReadLimits(
    max_cell_bytes=16 * 2**10,
    max_row_bytes=64 * 2**10,
    max_total_bytes=MAX_POOL_BYTES,
    max_rows=50_000,
    remedies={"cell": _SMALLER, "row": _SMALLER, "rows": _SMALLER, "total": _SMALLER},
)


def control_pool_read(path: Path | str) -> tuple[tuple[ItemKind, PairCandidate], ...]:
    """The (kind, pair) rows of a control pool file; raises ``DatasetFormatError`` listing every
    problem with its line."""
    path = Path(path)
    if not path.is_file():
        raise DatasetFormatError([Problem(str(path), None, "no such control pool file")])
    _check_kind_and_size(str(path), path.suffix, path.stat().st_size)
    return control_pool_parse(read_table(path, fmt=detect_format(path), limits=POOL_LIMITS).rows, source=str(path))


class Upload(Protocol):
    """What the pool needs of an uploaded file (Django's ``UploadedFile`` has it)."""

    name: str
    size: int

    def chunks(self) -> Iterable[bytes]: ...


def control_pool_from_upload(upload: Upload) -> tuple[tuple[ItemKind, PairCandidate], ...]:
    """The pairs of an uploaded control pool (the page's and the API's lock); problems name the
    uploaded file's name and line, as for a file on disk. The upload is refused by its size before
    it is read, and copied to a temporary file chunk by chunk, never held whole in memory."""
    suffix = Path(upload.name).suffix.lower()
    _check_kind_and_size(upload.name, suffix, upload.size)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"control-pool{suffix}"
        with path.open("wb") as copy:
            for chunk in upload.chunks():
                copy.write(chunk)
        table = read_table(path, fmt=detect_format(path, label=upload.name), limits=POOL_LIMITS, label=upload.name)
        return control_pool_parse(table.rows, source=upload.name)


def _check_kind_and_size(name: str, suffix: str, size: int) -> None:
    if suffix.lower() not in (".jsonl", ".csv", ".tsv"):
        raise DatasetFormatError([Problem(name, None, "a control pool is a .jsonl, .csv or .tsv file")])
    if size > MAX_POOL_BYTES:
        raise DatasetFormatError(
            [
                Problem(
                    name,
                    None,
                    f"the file has {megabytes(size)}, more than the {megabytes(MAX_POOL_BYTES)} a control pool may "
                    "have: a pool needs a few hundred pairs; upload a smaller sample of them",
                )
            ]
        )


def _text(value: object) -> str:
    return "" if value is None else str(value).strip()


def control_pool_parse(rows: Sequence[RawRow], *, source: str) -> tuple[tuple[ItemKind, PairCandidate], ...]:
    """Check the rows of a control pool (see the module docstring)."""
    problems: list[Problem] = []
    pairs: list[tuple[ItemKind, PairCandidate]] = []
    seen: dict[tuple[str, str], int] = {}
    for row in rows:
        fields = row.fields
        unknown = sorted(set(fields) - set(COLUMNS))
        if unknown:
            problems.append(
                Problem(source, row.line, f"unknown column(s) {', '.join(unknown)}: use {', '.join(COLUMNS)}")
            )
            continue
        text_a, text_b, kind = (_text(fields.get(name)) for name in COLUMNS[:3])
        language_a, language_b = _text(fields.get("language_a")).lower(), _text(fields.get("language_b")).lower()
        missing = [name for name, value in (("text_a", text_a), ("text_b", text_b)) if not value]
        if missing:
            problems.append(Problem(source, row.line, f"{' and '.join(missing)} must not be empty"))
            continue
        if kind not in _KINDS:
            problems.append(Problem(source, row.line, f"kind must be {' or '.join(_KINDS)}, got {kind!r}"))
            continue
        if bool(language_a) != bool(language_b):
            problems.append(
                Problem(source, row.line, "give both language_a and language_b, or neither (same-language pair)")
            )
            continue
        if text_a == text_b:
            problems.append(Problem(source, row.line, "text_a and text_b are the same text"))
            continue
        if kind == ItemKind.EASY_POSITIVE and is_punctuation_edit(text_a, text_b):
            problems.append(
                Problem(
                    source,
                    row.line,
                    "text_b differs from text_a only in punctuation or case: an easy positive must be a "
                    "real meaning-preserving rewrite (annotators spot near copies)",
                )
            )
            continue
        if (text_a, text_b) in seen:
            problems.append(Problem(source, row.line, f"the same pair as line {seen[(text_a, text_b)]}"))
            continue
        seen[(text_a, text_b)] = row.line
        pairs.append(
            (ItemKind(kind), PairCandidate(text_a, text_b, language_a, language_b, origin=POOL_ORIGIN, as_given=True))
        )
    if not pairs and not problems:
        problems.append(Problem(source, None, "the control pool holds no pairs"))
    if problems:
        raise DatasetFormatError(problems)
    return tuple(pairs)
