"""The metrics stored with a unit's result are JSON-safe without touching their text."""

import json
import math

import numpy as np

from evaluation.benchmark_scoring import json_safe


def test_non_finite_numbers_become_null_in_the_structure():
    metrics = {
        "spearman": float("nan"),
        "low": float("-inf"),
        "high": math.inf,
        "ap": np.float32("nan"),
        "per_k": {"1": 0.5, "10": float("-inf")},
        "scores": (1.0, float("nan"), np.float64("inf")),
        "n_pairs": np.int64(7),
    }
    cleaned = json_safe(metrics)
    assert cleaned == {
        "spearman": None,
        "low": None,
        "high": None,
        "ap": None,
        "per_k": {"1": 0.5, "10": None},
        "scores": [1.0, None, None],
        "n_pairs": 7.0,
    }
    text = json.dumps(cleaned, allow_nan=False)  # what a JSONField and the result file store
    assert json.loads(text) == cleaned and "-null" not in text


def test_strings_are_never_rewritten():
    metrics = {"label": "NaN", "note": "Infinity and -Infinity are not numbers here", "NaN": 1.0}
    assert json_safe(metrics) == metrics
