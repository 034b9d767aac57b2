"""The declared layers of ``.importlinter`` as the text diagram of docs/architecture.md ("Layers").

    .venv/bin/python scripts/layers_doc.py           # print it
    .venv/bin/python scripts/layers_doc.py --write   # replace the section of docs/architecture.md

tests/test_import_layers.py checks that the section equals this output, so the page shows the
contracts that `lint-imports` checks.
"""

from __future__ import annotations

import sys
from pathlib import Path

from importlinter.api import read_configuration

ROOT = Path(__file__).resolve().parent.parent
CONTRACTS = ROOT / ".importlinter"
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- layers: written by scripts/layers_doc.py from .importlinter; do not edit by hand -->"
END = "<!-- /layers -->"


def _contract_lines(contract: dict) -> list[str]:
    lines = [f"{contract['name']} [{contract['id']}]"]
    if contract["type"] == "layers":
        layers = contract["layers"]
        for i, layer in enumerate(layers):
            lines.append(f"    {layer}")
            if i < len(layers) - 1:
                lines.append("      ↓")
    elif contract["type"] == "forbidden":
        for source in contract["source_modules"]:
            lines.append(f"    {source}  ✗→  {', '.join(contract['forbidden_modules'])}")
    else:
        lines.append(f"    ({contract['type']} contract)")
    return lines


def layers_text(path: Path = CONTRACTS) -> str:
    """The diagram, fenced, as the page shows it: each layer imports only the layers below it
    (``↓``); ``a | b``: one layer whose parts may not import each other; ``a : b``: one layer."""
    config = read_configuration(str(path))
    blocks = ["\n".join(_contract_lines(contract)) for contract in config["contracts_options"]]
    return "```\n" + "\n\n".join(blocks) + "\n```\n"


def doc_section(text: str) -> str:
    """What docs/architecture.md holds between the markers."""
    start, end = text.index(BEGIN) + len(BEGIN) + 1, text.index(END)
    return text[start:end]


def main(argv: list[str]) -> int:
    diagram = layers_text()
    if argv[1:] == ["--write"]:
        text = DOC.read_text(encoding="utf-8")
        start, end = text.index(BEGIN) + len(BEGIN) + 1, text.index(END)
        DOC.write_text(text[:start] + diagram + text[end:], encoding="utf-8")
    else:
        sys.stdout.write(diagram)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
