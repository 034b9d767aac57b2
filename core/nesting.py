"""How deeply a JSON or YAML text nests, found before any recursive parser reads it (pure module).

libyaml's composer recurses in C for each nested collection: a 100 KB file of 50,000 ``[`` takes
the process down with a stack overflow (SIGSEGV), which no ``except`` can catch. Python's ``json``
gives up with a ``RecursionError`` instead, which callers rarely expect. So every text a user hands
to the platform goes through ``nesting_check`` first; it never recurses:

- JSON: one regular-expression pass over strings and brackets (brackets inside strings do not count);
- YAML: the parser's event stream (a state machine, in C with libyaml), counting collection starts
  and ends, stopping at the first collection past the limit.

A text that does not parse is left to the real parser, which then fails on the same place with its
own message: the events before that place were counted, so it never sees a deeper nesting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal

import yaml

from core.errors import ShiftlabError

MAX_NESTING = 64

# A string (terminated or not) or one bracket; everything else is skipped.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


class NestingError(ShiftlabError, ValueError):
    """A text nested deeper than allowed; ``line`` (1-based) is where the limit was passed and
    ``problem`` says what is wrong without the line (for callers that name lines themselves)."""

    def __init__(self, line: int, limit: int):
        self.line = line
        self.limit = limit
        self.problem = f"nested too deeply: more than {limit} levels of lists and mappings"
        super().__init__(f"{self.problem} (line {line}): flatten the data, or check that this is the file you meant")


def nesting_check(
    text: str,
    fmt: Literal["json", "yaml"],
    *,
    limit: int = MAX_NESTING,
    on_yaml_event: Callable[[yaml.Event], None] | None = None,
) -> None:
    """Raise ``NestingError`` when ``text`` nests lists and mappings deeper than ``limit``.

    ``on_yaml_event`` sees every YAML event scanned (e.g. to refuse anchors in the same pass).
    """
    if fmt == "json":
        _json_check(text, limit)
    elif fmt == "yaml":
        _yaml_check(text, limit, on_yaml_event)
    else:
        raise ValueError(f"unknown format {fmt!r}: use json or yaml")


def loads_json(text: str | bytes, *, limit: int = MAX_NESTING, **options: Any) -> Any:
    """``json.loads`` after ``nesting_check``: how user text becomes JSON data (a form or multipart
    field, a line of a file, a command's option; the API's JSON bodies go through
    ``core.parsers.JSONParser``, which checks the same way before DRF parses). Raises
    ``NestingError`` (a ``ValueError``) for a text nested deeper than ``limit``, and
    ``json.loads``'s own errors otherwise."""
    if isinstance(text, bytes | bytearray):
        text = text.decode(json.detect_encoding(text), "surrogatepass")  # as json.loads decodes bytes
    nesting_check(text, "json", limit=limit)
    return json.loads(text, **options)


def _json_check(text: str, limit: int) -> None:
    if text.count("[") + text.count("{") <= limit:
        return  # cannot nest deeper than it has brackets
    depth = 0
    for token in _JSON_TOKENS.finditer(text):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                raise NestingError(text.count("\n", 0, token.start()) + 1, limit)
        elif char in "]}":
            depth -= 1


def _yaml_check(text: str, limit: int, on_event: Callable[[yaml.Event], None] | None) -> None:
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_YAML_LOADER):
            if on_event is not None:
                on_event(event)
            if isinstance(event, _OPEN):
                depth += 1
                if depth > limit:
                    raise NestingError(event.start_mark.line + 1, limit)
            elif isinstance(event, _CLOSE):
                depth -= 1
    except yaml.YAMLError:
        return  # the real parser reports it, at this same place
