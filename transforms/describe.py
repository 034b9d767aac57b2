"""Plain-words descriptions of generation parameters and judge report options (pure module): one
wording for every page and command that shows them, instead of a Python dict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from transforms.registry import TRANSFORMATIONS

SEPARATOR = " · "


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _attempts(n: object) -> str:
    return "1 attempt" if n == 1 else f"up to {n} attempts"


_PARAM_WORDS = {
    "temperature": lambda v: f"temperature {_number(v)}",
    "top_p": lambda v: f"top-p {_number(v)}",
    "max_tokens": lambda v: f"max {v} tokens",
    "max_attempts": _attempts,
}


def params_text(params: Mapping[str, object] | None) -> str:
    """``{"temperature": 0.7, "top_p": 0.95, "max_tokens": 256, "max_attempts": 3}`` as
    "temperature 0.7 · top-p 0.95 · max 256 tokens · up to 3 attempts". Keys it does not know
    follow as "key value", so nothing stored is hidden."""
    if not params:
        return "–"
    known = [_PARAM_WORDS[key](params[key]) for key in _PARAM_WORDS if key in params]
    other = [f"{key.replace('_', ' ')} {_number(value)}" for key, value in params.items() if key not in _PARAM_WORDS]
    return SEPARATOR.join(known + other)


_OPTION_WORDS = {
    "transformation": lambda v: f"transformation {v}",
    "split": lambda v: f"split {v}",
    "limit": lambda v: f"first {v} item{'' if v == 1 else 's'}",
    "seed": lambda v: f"seed {v}",
    "n_resamples": lambda v: f"{v} bootstrap resamples",
    "alpha": lambda v: f"alpha {_number(v)}",
}


def options_text(options: Mapping[str, object] | None) -> str:
    """A judge report's options (seed, limits, bootstrap settings) in words; unset ones (None) are
    left out and the judge's own parameters are described by :func:`params_text`."""
    options = {key: value for key, value in (options or {}).items() if value is not None and key != "judge_params"}
    known = [_OPTION_WORDS[key](options[key]) for key in _OPTION_WORDS if key in options]
    other = [f"{key.replace('_', ' ')} {_number(value)}" for key, value in options.items() if key not in _OPTION_WORDS]
    return SEPARATOR.join(known + other) or "–"


def transformation_title(name: str) -> str:
    """A transformation by its registry label ("typos_2" → "Keyboard typos 2%"); a name the
    registry no longer holds is shown as stored."""
    spec = TRANSFORMATIONS.get(str(name))
    return spec.label if spec is not None else str(name)


class _Dataset(Protocol):
    name: str


class _Run(Protocol):
    pk: int
    transformation: str
    seed: int
    dataset: _Dataset


def run_label(run: _Run) -> str:
    """A transformation run as a person picks it: "Keyboard typos 2% of demo-sts (run 4, seed
    1337)": the transformation's title first, the run's number after it."""
    return f"{transformation_title(run.transformation)} of {run.dataset.name} (run {run.pk}, seed {run.seed})"
