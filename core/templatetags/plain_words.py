"""Stored keys in words on pages (issue 31): ``{{ key|plain_key }}`` turns a data key such as
``n_examples`` or ``mean_pairwise_spearman`` into "examples" or "mean Spearman correlation
between two raters"; a key not listed loses its underscores."""

from django import template

register = template.Library()

KEY_WORDS = {
    "n_examples": "examples",
    "n_items": "items",
    "n_rows": "rows",
    "n_problems": "problems",
    "mean_pairwise_spearman": "mean Spearman correlation between two raters",
    "mean_pairwise_kendall_tau": "mean Kendall τ between two raters",
    "mean_pairwise_ari": "mean adjusted Rand index between two raters",
    "fleiss_kappa": "Fleiss' κ",
    "krippendorff_alpha": "Krippendorff's α",
}


@register.filter
def plain_key(key: object) -> str:
    text = str(key)
    if text in KEY_WORDS:
        return KEY_WORDS[text]
    words = text.replace("_", " ").strip()
    return f"number of {words[2:]}" if words.startswith("n ") else words
