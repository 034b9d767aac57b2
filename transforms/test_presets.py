"""The papers' protocols as presets: what each fixes, how unset settings are filled (pure)."""

from __future__ import annotations

import pytest

from transforms.presets import (
    PRESETS,
    PresetConflict,
    preset_choices,
    preset_get,
    resolve_preset,
    resolve_report_options,
)


def test_multi_axis_paper_fixes_greedy_generation_three_seeds_and_its_statistics_units():
    preset = preset_get("multi-axis-paper")
    assert (preset.temperature, preset.top_p, preset.seeds) == (0.0, 1.0, (1337, 1338, 1339))
    assert preset.encoder_dtype is None
    assert dict(preset.report_options) == {
        "tau_unit": "seed_mean",
        "axis_tau": "axis_mean_scores",
        "split_half_on": "scores",
        "split_half_splits": 1000,
        "wilcoxon_unit": "model_mean",
        "shift_interval": "walsh",
        "shift_figure_unit": "run_aggregated",
    }


def test_paraphrasing_paper_fixes_six_seeds_from_1337_and_bfloat16_encoders():
    preset = preset_get("paraphrasing-paper")
    assert preset.seeds == (1337, 1338, 1339, 1340, 1341, 1342)
    assert preset.encoder_dtype == "bfloat16"
    assert (preset.temperature, preset.top_p) == (None, None)
    assert dict(preset.report_options) == {"tau_unit": "seed_mean", "baseline_compare": "transformed"}


def test_report_options_cannot_be_changed_through_the_preset():
    with pytest.raises(TypeError):
        PRESETS["multi-axis-paper"].report_options["tau_unit"] = "per_seed"


def test_a_preset_fills_unset_settings_and_keeps_equal_explicit_ones():
    resolved = resolve_preset("multi-axis-paper")
    assert (resolved.preset, resolved.seeds, resolved.temperature, resolved.top_p) == (
        "multi-axis-paper",
        (1337, 1338, 1339),
        0.0,
        1.0,
    )
    same = resolve_preset("multi-axis-paper", seeds=[1338], temperature=0, top_p=1.0, languages=["de"])
    assert same.seeds == (1338,) and same.temperature == 0 and same.languages == ("de",)
    paraphrasing = resolve_preset("paraphrasing-paper", temperature=0.3)
    assert paraphrasing.temperature == 0.3 and paraphrasing.encoder_dtype == "bfloat16"


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"temperature": 0.7}, "temperature=0.7 conflicts"),
        ({"top_p": 0.95}, "top_p=0.95 conflicts"),
        ({"seeds": [1337, 7]}, "seed=\\[1337, 7\\] conflicts"),
    ],
)
def test_a_conflicting_explicit_setting_names_the_preset_field(kwargs, field):
    with pytest.raises(PresetConflict, match=f"{field} with preset 'multi-axis-paper'"):
        resolve_preset("multi-axis-paper", **kwargs)


def test_encoder_dtype_conflict_and_no_preset():
    with pytest.raises(PresetConflict, match="encoder_dtype='float32' conflicts"):
        resolve_preset("paraphrasing-paper", encoder_dtype="float32")
    plain = resolve_preset(None, seeds=[5], temperature=0.9)
    assert (plain.preset, plain.seeds, plain.temperature, plain.top_p, dict(plain.report_options)) == (
        "",
        (5,),
        0.9,
        None,
        {},
    )


def test_unknown_preset_and_choices():
    with pytest.raises(ValueError, match="unknown preset 'mteb': choose one of multi-axis-paper, paraphrasing-paper"):
        resolve_preset("mteb")
    assert [name for name, _ in preset_choices()] == ["multi-axis-paper", "paraphrasing-paper"]


def test_report_options_are_filled_from_the_preset_and_conflicts_named():
    given = {"tau_unit": None, "baseline_compare": "transformed", "split_half_splits": None}
    assert resolve_report_options("multi-axis-paper", given) == {
        "tau_unit": "seed_mean",
        "axis_tau": "axis_mean_scores",
        "split_half_on": "scores",
        "split_half_splits": 1000,
        "wilcoxon_unit": "model_mean",
        "shift_interval": "walsh",
        "shift_figure_unit": "run_aggregated",
        "baseline_compare": "transformed",
    }
    assert resolve_report_options(None, given) == {"baseline_compare": "transformed"}
    with pytest.raises(PresetConflict, match="wilcoxon_unit='per_model' conflicts with preset 'multi-axis-paper'"):
        resolve_report_options("multi-axis-paper", {"wilcoxon_unit": "per_model"})
    with pytest.raises(PresetConflict, match="baseline_compare='delta' conflicts with preset 'paraphrasing-paper'"):
        resolve_report_options("paraphrasing-paper", {"baseline_compare": "delta"})
