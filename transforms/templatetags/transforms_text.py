"""Template filters that show generators and judges in words: the model by name with its backend
alias after it, and parameters as "temperature 0.7 · top-p 0.95 · …" rather than a dict."""

from __future__ import annotations

from collections.abc import Mapping

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core import vocabulary
from transforms import describe
from transforms.backends import configured_model
from transforms.models import GeneratorConfig
from transforms.registry import TRANSFORMATIONS

register = template.Library()

register.filter("params_text", describe.params_text)
register.filter("options_text", describe.options_text)
register.filter("transformation_title", describe.transformation_title)
register.filter("run_label", describe.run_label)

NO_LLM_MODEL = "none"  # what transform_run_create stores for a transformation that uses no LLM


def _model(alias: str, model: str = "") -> str:
    return model or configured_model(alias) or alias


def _label(model: str, alias: str) -> SafeString:
    if model == alias:
        return format_html("{}", model)
    return format_html('{} <span class="muted">({})</span>', model, alias)


@register.filter
def generator_model(generator: GeneratorConfig) -> str:
    """A run's model by name ("no LLM" for a transformation without one)."""
    if generator.model == NO_LLM_MODEL:
        return "no LLM"
    return _model(generator.backend_alias, generator.model)


@register.filter
def generator_label(generator: GeneratorConfig) -> SafeString:
    """A run's model by name with its backend alias secondary."""
    model = generator_model(generator)
    return format_html("{}", model) if generator.model == NO_LLM_MODEL else _label(model, generator.backend_alias)


@register.filter
def judge_label(alias: str, models: Mapping[str, str] | None = None) -> SafeString:
    """A judge's model by name, from the report's stored ``models`` when given, else the model the
    alias is configured with now; the alias secondary."""
    return _label(_model(alias, (models or {}).get(alias, "")), alias)


@register.filter
def backend_option(alias: str) -> str:
    """A backend alias as the text of a form option: "model (alias)"."""
    model = _model(alias)
    return alias if model == alias else f"{model} ({alias})"


@register.filter
def plain_group(group: str) -> str:
    """An agreement group ("overall", "axis:lexical", "transformation:typos_2") in words."""
    return vocabulary.plain_group(group, {name: t.label for name, t in TRANSFORMATIONS.items()})
