"""The safe reader of a benchmark config's text (pure module): ``config_load`` turns JSON or YAML
text into plain JSON data, refusing what would let a small file cost a lot or hide what it says
(see ``config_schema``, which types the data it returns).
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

from annotation.configs.config_schema import MAX_CONFIG_BYTES, MAX_DEPTH, ConfigError, Format, kind_of, path_join
from core.nesting import NestingError, nesting_check

# libyaml when it is there: a pure-Python YAML parser takes over 30 s for the largest config.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _refuse_anchor(event: yaml.Event) -> None:
    """Refuse an anchor or alias as a parser event (nothing is composed or expanded)."""
    if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
        mark = event.start_mark
        raise ConfigError(
            "",
            f"YAML anchors and aliases (&/*) are not allowed (line {mark.line + 1}, column {mark.column + 1}): "
            "write each value out (a YAML file exported by Shiftlab before 2026-11-25 has them: download "
            "it again from the exports page, or use its JSON file)",
        )


class _StrictLoader(_SafeLoader):
    """The safe loader, refusing merge keys and duplicate keys (anchors, aliases and deep nesting
    are refused before it runs, in ``config_load``'s scan of the parser's events)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise ConfigError("", f"YAML merge keys (<<) are not allowed (line {key_node.start_mark.line + 1})")
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str):
                if key in seen:
                    raise ConfigError("", f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ConfigError("", f"duplicate key {key!r} in a JSON object")
        out[key] = value
    return out


def _json_constant(name: str) -> float:
    raise ConfigError("", f"{name} is not a number a benchmark config may hold")


def config_load(text: str, fmt: Format) -> dict[str, Any]:
    """The plain JSON data of a config's text (a mapping), or a ``ConfigError`` saying why not."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            "", f"the file has {size} bytes, more than the {MAX_CONFIG_BYTES} a benchmark config may have"
        )
    if fmt not in ("json", "yaml"):
        raise ConfigError("", f"unknown format {fmt!r}: use json or yaml")
    try:
        # Before any parser that recurses: libyaml's composer overflows the C stack on deep nesting.
        nesting_check(text, fmt, limit=MAX_DEPTH, on_yaml_event=_refuse_anchor if fmt == "yaml" else None)
    except NestingError as exc:
        raise ConfigError("", f"the file is {exc}") from None
    try:
        if fmt == "json":
            data = json.loads(text, object_pairs_hook=_json_object, parse_constant=_json_constant)
        else:
            data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - _StrictLoader is a safe loader
    except ConfigError:
        raise
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError("", f"the file does not parse as {fmt}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("", f"the file holds {kind_of(data)}, not a benchmark config mapping")
    _check_json_data(data, "", 0)
    return data


def _check_json_data(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ConfigError(path, f"nested too deeply (at most {MAX_DEPTH} levels)")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(path, f"keys must be strings, found {kind_of(key)} {key!r}")
            _check_text(key, path)
            _check_json_data(item, path_join(path, key), depth + 1)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            _check_json_data(item, f"{path}[{n}]", depth + 1)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(path, "NaN and infinite numbers are not allowed")
    elif isinstance(value, str):
        _check_text(value, path)
    elif not (value is None or isinstance(value, int | bool)):
        raise ConfigError(path, f"{kind_of(value)} is not JSON data (quote dates and times)")


def _check_text(value: str, path: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(path, "holds an unpaired surrogate (\\ud800-\\udfff), which is not Unicode text") from None
