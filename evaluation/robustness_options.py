"""The robustness report's options: the units of its statistics, where the papers and this report
could differ (pure module). Their defaults are the multi-axis paper's protocol, read from its
preset (``transforms.presets.DEFAULT_PROTOCOL``); pages, the API and the command offer
``OPTION_CHOICES`` and build ``ReportOptions`` from plain data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from core.errors import ShiftlabError
from evaluation.stats import SHIFT_INTERVALS
from transforms.presets import DEFAULT_PROTOCOL, preset_get, resolve_report_options

# Report options: name -> the values each accepts. Their defaults are the paper's protocol, read
# from its preset (transforms.presets.DEFAULT_PROTOCOL, the one place they are written); an option
# the paper leaves open falls back to OPEN_DEFAULTS.
_VALUES: dict[str, tuple[str, ...]] = {
    "tau_unit": ("seed_mean", "per_seed"),
    "axis_tau": ("axis_mean_scores", "pooled"),
    "split_half_on": ("scores", "deltas"),
    "wilcoxon_unit": ("model_mean", "per_model"),
    "baseline_compare": ("delta", "transformed"),
    "shift_interval": SHIFT_INTERVALS,
    "shift_figure_unit": ("run_aggregated", "pooled"),
}
OPEN_DEFAULTS: dict[str, object] = {"baseline_compare": "delta"}
PAPER_DEFAULTS: Mapping[str, object] = {**OPEN_DEFAULTS, **preset_get(DEFAULT_PROTOCOL).report_options}
# name -> allowed values, the default first (the default's reason is in ReportOptions)
OPTION_CHOICES: dict[str, tuple[str, ...]] = {
    name: (PAPER_DEFAULTS[name], *(v for v in values if v != PAPER_DEFAULTS[name])) for name, values in _VALUES.items()
}
MAX_SPLITS = 100_000


class ReportOptionError(ShiftlabError, ValueError):
    """An unknown report option or value; the message names the option and what it accepts."""


@dataclass(frozen=True)
class ReportOptions:
    """Units of the report's statistics, where the papers and this report could differ. The
    defaults are the multi-axis (HTEB) paper's protocol (SPEC §5), taken from its preset; the
    other values stay as named options.

    - ``tau_unit``: ``seed_mean`` (default, the paper) ranks the models on each dataset's scores
      averaged over seeds: how stable the expected ranking is; ``per_seed`` (the default before
      November 2026) ranks them on each dataset × seed result: how stable one draw of the
      transformation leaves the ranking.
    - ``axis_tau``: ``axis_mean_scores`` (default, the paper) ranks models on the axis' scores
      averaged over its transformations (the axis score a leaderboard shows); ``pooled`` pools the
      τ of the axis' transformations (the typical transformation).
    - ``split_half_on``: ``scores`` (default, the paper: transformed scores) or ``deltas`` (the
      robustness profile); ``split_half_splits``: random splits (default 1000, the paper; more
      splits only make the median's Monte Carlo error smaller).
    - ``wilcoxon_unit`` (all-models tables only): ``model_mean`` (default) averages the models'
      results per dataset × transformation × seed first (the papers); ``per_model`` (before
      November 2026) made every model × dataset × seed result a unit. The models are scored on the
      same transformed texts, so their results are not independent: counting each model as a unit
      multiplies n by the number of models and makes p-values too small. That was a bug, hence
      the new default; ``per_model`` stays for comparison with old reports.
    - ``baseline_compare``: ``delta`` (default; the multi-axis paper makes no such comparison)
      compares a model's Δ with the baseline's (is it more robust?); ``transformed`` compares their
      transformed scores (is it better on the transformed data? the paraphrasing paper).
    - ``shift_interval``: the Hodges–Lehmann interval. ``walsh`` (default, the papers) is the
      distribution-free interval between ordered Walsh averages, its order from the signed-rank
      distribution, with its achieved coverage; ``bootstrap`` (before November 2026) a percentile
      bootstrap, which covered the true shift only 89% of the time at n = 8 (issue 29).
    - ``shift_figure_unit``: the table the shifts figure draws (its stars are that table's Holm
      p). ``run_aggregated`` (default, the paper: a dataset, runs averaged); ``pooled`` (before
      November 2026) a dataset × seed result, a unit the paper rejects (seeds of one dataset are
      not independent, so its p-values are too small).
    """

    tau_unit: str = PAPER_DEFAULTS["tau_unit"]
    axis_tau: str = PAPER_DEFAULTS["axis_tau"]
    split_half_on: str = PAPER_DEFAULTS["split_half_on"]
    split_half_splits: int = PAPER_DEFAULTS["split_half_splits"]
    wilcoxon_unit: str = PAPER_DEFAULTS["wilcoxon_unit"]
    baseline_compare: str = PAPER_DEFAULTS["baseline_compare"]
    shift_interval: str = PAPER_DEFAULTS["shift_interval"]
    shift_figure_unit: str = PAPER_DEFAULTS["shift_figure_unit"]

    def __post_init__(self) -> None:
        for name, choices in OPTION_CHOICES.items():
            if getattr(self, name) not in choices:
                raise ReportOptionError(
                    f"report option {name}={getattr(self, name)!r} is unknown: use one of {', '.join(choices)}"
                )
        splits = self.split_half_splits
        if isinstance(splits, bool) or not isinstance(splits, int) or not 1 <= splits <= MAX_SPLITS:
            raise ReportOptionError(
                f"report option split_half_splits must be an integer from 1 to {MAX_SPLITS}, got {splits!r}"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, object] | None) -> ReportOptions:
        """Options from plain data (a preset's ``report_options``, a query string, a command line);
        unset or None values keep the default; an integer given as text is accepted for the splits."""
        return cls(**_given_options(values))

    @classmethod
    def for_preset(cls, preset: str | None, values: Mapping[str, object] | None = None) -> ReportOptions:
        """Options from plain data filled from ``preset``'s (a run's preset; none: the defaults).
        A value that differs from the preset's is refused, naming the option and the preset."""
        given = _given_options(values)
        try:
            return cls(**resolve_report_options(preset or None, given))
        except ReportOptionError:
            raise
        except ValueError as exc:  # PresetConflict, or an unknown preset
            raise ReportOptionError(str(exc)) from None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def tau_unit_text(self, level: str) -> str:
        cell = "dataset × seed" if self.tau_unit == "per_seed" else "dataset (scores averaged over seeds first)"
        if level == "transformation":
            return f"unit: {cell} ranking of the models"
        if self.axis_tau == "pooled":
            return f"unit: {cell} × transformation of the axis (the transformations' τ pooled)"
        return f"unit: {cell} ranking on the axis' scores (averaged over its transformations first)"

    def comparison_text(self, baseline: str | None) -> str:
        what = "Δ model − Δ baseline" if self.baseline_compare == "delta" else "transformed score model − baseline"
        return f"unit: dataset × seed, {what}; baseline {baseline}"

    def split_half_text(self) -> str:
        what = "mean Δ" if self.split_half_on == "deltas" else "mean transformed score"
        return f"dataset × model {what} on the axis, strata: task type, {self.split_half_splits} splits"


def _given_options(values: Mapping[str, object] | None) -> dict[str, object]:
    """The set options of plain data (None and "" are unset); unknown names refused; the splits
    given as text made an integer."""
    values = {k: v for k, v in (values or {}).items() if v is not None and v != ""}
    unknown = sorted(set(values) - {f.name for f in fields(ReportOptions)})
    if unknown:
        known = ", ".join(f.name for f in fields(ReportOptions))
        raise ReportOptionError(f"unknown report option(s) {', '.join(unknown)}: the options are {known}")
    if isinstance(values.get("split_half_splits"), str):
        text = values["split_half_splits"]
        if not text.strip().isdigit():
            raise ReportOptionError(f"report option split_half_splits must be an integer, got {text!r}")
        values["split_half_splits"] = int(text)
    return values


# What each option asks and each value means, in words for the report page (issue 31); the
# query string and the exports keep the names above.
OPTION_LABELS: dict[str, str] = {
    "tau_unit": "Ranking stability: rank the models on",
    "axis_tau": "Ranking stability per axis: rank on",
    "split_half_on": "Split-half reliability of",
    "split_half_splits": "Split-half reliability: random splits",
    "wilcoxon_unit": "All-models test: one unit is",
    "baseline_compare": "Model vs baseline: compare",
    "shift_interval": "Confidence interval of the shift",
    "shift_figure_unit": "Shift figure: one point is",
}
VALUE_LABELS: dict[tuple[str, str], str] = {
    ("tau_unit", "seed_mean"): "each dataset's scores averaged over seeds",
    ("tau_unit", "per_seed"): "each dataset and seed apart",
    ("axis_tau", "axis_mean_scores"): "the axis' mean score (as a leaderboard shows it)",
    ("axis_tau", "pooled"): "each transformation of the axis, pooled",
    ("split_half_on", "scores"): "the transformed scores",
    ("split_half_on", "deltas"): "the changes (transformed − original)",
    ("wilcoxon_unit", "model_mean"): "a dataset, transformation and seed, models averaged",
    ("wilcoxon_unit", "per_model"): "each model's result apart (older reports; p-values too small)",
    ("baseline_compare", "delta"): "their changes: is the model more robust?",
    ("baseline_compare", "transformed"): "their transformed scores: is the model better on changed texts?",
    ("shift_interval", "walsh"): "distribution-free (Walsh averages)",
    ("shift_interval", "bootstrap"): "percentile bootstrap (older reports)",
    ("shift_figure_unit", "run_aggregated"): "a dataset, seeds averaged",
    ("shift_figure_unit", "pooled"): "a dataset and seed (older reports)",
}
