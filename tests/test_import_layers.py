"""The declared layers hold (issue 43): `lint-imports` keeps every contract of .importlinter (the apps'
order, core importing no app, annotation's parts), and docs/architecture.md shows those contracts."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _layers_doc():
    spec = importlib.util.spec_from_file_location("layers_doc", ROOT / "scripts" / "layers_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_import_contract_is_kept():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-logo", "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_architecture_page_shows_the_declared_layers():
    layers_doc = _layers_doc()
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    expected = layers_doc.layers_text()
    assert layers_doc.doc_section(page) == expected, "run: .venv/bin/python scripts/layers_doc.py --write"
