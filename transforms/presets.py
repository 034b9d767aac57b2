"""Named protocols of the robustness papers, as presets of run settings (pure module).

A preset fills the settings a user left unset; a setting the user set to another value than the
preset's is an error (:class:`PresetConflict`) naming the field, so a run that claims a paper's
protocol always follows it. Sources are given in ``docs/transformations.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from core.errors import ShiftlabError

__all__ = [
    "DEFAULT_PROTOCOL",
    "PRESETS",
    "Preset",
    "PresetConflict",
    "PresetError",
    "ResolvedSettings",
    "preset_choices",
    "preset_get",
    "resolve_preset",
    "resolve_report_options",
]


@dataclass(frozen=True)
class Preset:
    """A paper's protocol. ``None`` means the paper fixes no value: Shiftlab's default applies.

    Attributes
    ----------
    name, label, source : str
        Identifier (``--preset NAME``), short title, and where the settings come from.
    temperature, top_p : float or None
        Generation sampling settings.
    seeds : tuple of int
        The run seeds; a preset run without an explicit seed runs every one of them.
    encoder_dtype : str or None
        Floating-point type the encoders are loaded in ("bfloat16", ...).
    languages : tuple of str or None
        Target/pivot languages of translation transformations.
    report_options : mapping
        Options of the robustness report's statistics (their units), passed to the report as they are.
    """

    name: str
    label: str
    source: str
    seeds: tuple[int, ...]
    temperature: float | None = None
    top_p: float | None = None
    encoder_dtype: str | None = None
    languages: tuple[str, ...] | None = None
    report_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "report_options", MappingProxyType(dict(self.report_options)))


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="multi-axis-paper",
            label="Multi-axis robustness paper",
            source="the multi-axis robustness benchmark paper: greedy generation, three seeds from 1337",
            seeds=(1337, 1338, 1339),
            temperature=0.0,
            top_p=1.0,
            # Its statistics (Table 13: runs averaged, datasets as observations). Shiftlab's report
            # defaults are these (DEFAULT_PROTOCOL): this mapping is their only definition.
            report_options={
                "tau_unit": "seed_mean",
                "axis_tau": "axis_mean_scores",
                "split_half_on": "scores",
                "split_half_splits": 1000,
                "wilcoxon_unit": "model_mean",
                "shift_interval": "walsh",
                "shift_figure_unit": "run_aggregated",
            },
        ),
        Preset(
            name="paraphrasing-paper",
            label="Dynamic paraphrasing paper",
            source="the dynamic paraphrasing benchmark paper: six seeds from 1337, encoders in bfloat16",
            seeds=(1337, 1338, 1339, 1340, 1341, 1342),
            encoder_dtype="bfloat16",
            report_options={"tau_unit": "seed_mean", "baseline_compare": "transformed"},
        ),
    )
}


# The protocol whose report options are the robustness report's defaults (SPEC §5: the paper's
# units by default, the others as named options); evaluation.robustness.ReportOptions reads them.
DEFAULT_PROTOCOL = "multi-axis-paper"


class PresetError(ShiftlabError, ValueError):
    """An unknown preset, or a setting that conflicts with one."""


class PresetConflict(PresetError):
    """A setting given explicitly differs from the preset's value for it."""


@dataclass(frozen=True)
class ResolvedSettings:
    """The settings of a run once a preset (or none) has filled the unset ones; ``None`` = unset."""

    preset: str
    seeds: tuple[int, ...] | None
    temperature: float | None
    top_p: float | None
    encoder_dtype: str | None
    languages: tuple[str, ...] | None
    report_options: Mapping[str, Any]


def resolve_report_options(name: str | None, given: Mapping[str, Any]) -> dict[str, Any]:
    """The robustness report's options: ``given`` (``None`` is unset) filled from preset ``name``'s
    ``report_options``; an explicit value that differs from the preset's raises :class:`PresetConflict`."""
    chosen = {key: value for key, value in given.items() if value is not None}
    if not name:
        return chosen
    preset = preset_get(name)
    for key, fixed in preset.report_options.items():
        if key in chosen and chosen[key] != fixed:
            raise _conflict(preset, key, chosen[key], fixed)
        chosen[key] = fixed
    return chosen


def preset_get(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise PresetError(f"unknown preset {name!r}: choose one of {', '.join(PRESETS)}", field="preset") from None


def preset_choices() -> list[tuple[str, str]]:
    """(name, label) pairs for forms and serializers."""
    return [(p.name, p.label) for p in PRESETS.values()]


def _conflict(preset: Preset, setting: str, given: object, fixed: object) -> PresetConflict:
    return PresetConflict(
        f"{setting}={given!r} conflicts with preset {preset.name!r}, which fixes {setting}={fixed!r} "
        f"({preset.source}): leave {setting} unset or drop the preset",
        field=setting,
    )


def resolve_preset(
    name: str | None,
    *,
    seeds: Sequence[int] | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    encoder_dtype: str | None = None,
    languages: Sequence[str] | None = None,
) -> ResolvedSettings:
    """Fill the unset settings (``None``) from preset ``name`` and check the set ones against it.

    Explicit seeds must all be among the preset's seeds (a subset runs part of the protocol); every
    other explicit value must equal the preset's. Without a preset the settings come back unchanged.

    Raises
    ------
    ValueError
        Unknown preset.
    PresetConflict
        An explicit setting differs from the preset's; the message names the setting.
    """
    given_seeds = tuple(seeds) if seeds is not None else None
    given_languages = tuple(languages) if languages is not None else None
    if not name:
        return ResolvedSettings("", given_seeds, temperature, top_p, encoder_dtype, given_languages, {})
    preset = preset_get(name)
    if given_seeds is not None and not set(given_seeds) <= set(preset.seeds):
        raise _conflict(preset, "seed", list(given_seeds), list(preset.seeds))

    def pick(setting: str, given, fixed):
        if fixed is None or given is None:
            return fixed if given is None else given
        if given != fixed:
            raise _conflict(preset, setting, given, fixed)
        return given

    return ResolvedSettings(
        preset=preset.name,
        seeds=given_seeds or preset.seeds,
        temperature=pick("temperature", temperature, preset.temperature),
        top_p=pick("top_p", top_p, preset.top_p),
        encoder_dtype=pick("encoder_dtype", encoder_dtype, preset.encoder_dtype),
        languages=pick("languages", given_languages, preset.languages),
        report_options=preset.report_options,
    )
