"""The saving forecast with the design's own sequence (issue 40): continuations are settled by the
rule the gate uses (plug-in betting, aGRAPA betting or the asymptotic sequence), and a
prediction-powered gate's observations keep their own bounds. Checked against the rules run
directly on the same continuations' shape: a sequence that settles a known sequence sooner must be
forecast to settle sooner."""

import numpy as np

from annotation.science.saving_forecast import forecast_saving
from annotation.science.variance_sequences import asymptotic_first_settlements, first_settlements

SCALES = {"quality": (1.0, 5.0)}


def _forecast(values, sequence, **kwargs):
    return forecast_saving(
        {"quality": list(values)},
        threshold=3.0,
        alpha=0.05,
        scales=SCALES,
        min_items=10,
        total=100,
        seed=3,
        sequence=sequence,
        **kwargs,
    )


def test_each_sequence_forecasts_by_its_own_rule():
    rng = np.random.default_rng(5)
    observed = np.clip(rng.normal(3.6, 0.9, 8).round(), 1, 5)  # 8 items: not settled yet
    plugin, agrapa, asymptotic = (_forecast(observed, s) for s in ("plugin", "agrapa", "asymptotic"))
    for forecast in (plugin, agrapa, asymptotic):
        assert forecast is not None and not forecast.settled and 10 <= forecast.expected_items <= 100
    # The rules themselves, on one long sequence shaped like these items: the asymptotic one settles
    # first, and the forecasts keep that order.
    long = np.tile(observed, 13)[None, :100]
    n_asym, _ = asymptotic_first_settlements(long, threshold=3.0, alpha=0.05, alpha_pass=0.05, min_items=10)
    n_betting, _ = first_settlements(
        long, np.ones_like(long), np.full_like(long, 5.0), threshold=3.0, alpha=0.05, min_items=10
    )
    assert n_asym[0] < n_betting[0]
    assert asymptotic.expected_items <= agrapa.expected_items


def test_prediction_powered_observations_keep_their_bounds():
    rng = np.random.default_rng(6)
    values = rng.normal(3.8, 0.5, 8)
    wide = (np.full(8, -1.0), np.full(8, 7.0))  # a judge widens the bounds beyond the scale
    narrow = _forecast(values, "agrapa", bounds={"quality": (np.full(8, 1.0), np.full(8, 5.0))})
    widened = _forecast(values, "agrapa", bounds={"quality": wide})
    # Wider bounds cap the betting sequence's bets lower: it is forecast to settle no sooner.
    assert widened.expected_items >= narrow.expected_items
