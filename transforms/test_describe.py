"""Generation parameters and report options in words, not as a Python dict."""

from transforms.describe import options_text, params_text


def test_params_read_as_words_in_a_fixed_order():
    params = {"max_attempts": 3, "max_tokens": 256, "top_p": 0.95, "temperature": 0.7}
    assert params_text(params) == "temperature 0.7 · top-p 0.95 · max 256 tokens · up to 3 attempts"
    assert params_text({"temperature": 0.0, "max_attempts": 1}) == "temperature 0 · 1 attempt"


def test_unknown_params_are_shown_not_hidden_and_none_is_a_dash():
    assert params_text({"temperature": 1.0, "min_p": 0.05}) == "temperature 1 · min p 0.05"
    assert params_text({}) == params_text(None) == "–"


def test_report_options_leave_out_unset_values_and_the_judge_parameters():
    options = {
        "seed": 0,
        "judge_params": {"temperature": 0.0},
        "n_resamples": 1000,
        "limit": None,
        "split": "test",
        "alpha": 0.05,
        "transformation": "paraphrase",
    }
    assert (
        options_text(options)
        == "transformation paraphrase · split test · seed 0 · 1000 bootstrap resamples · alpha 0.05"
    )
    assert options_text({"limit": 1}) == "first 1 item"
    assert options_text({}) == "–"
