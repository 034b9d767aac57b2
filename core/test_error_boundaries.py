"""The three error boundaries render a ShiftlabError alike: API, page form, command."""

import pytest
from django import forms
from django.core.management.base import CommandError

from core.api_errors import exception_handler
from core.commands import ShiftlabCommand
from core.errors import ConflictError, ShiftlabError, TooLargeError
from core.pages import error_field


def test_the_api_answers_a_shiftlab_error_with_its_status_and_field():
    plain = exception_handler(ShiftlabError("seeds need a config"), {})
    assert (plain.status_code, plain.data) == (400, {"detail": "seeds need a config"})
    named = exception_handler(ShiftlabError("No project 'x'.", field="project"), {})
    assert (named.status_code, named.data) == (400, {"project": ["No project 'x'."]})
    assert exception_handler(ConflictError("in use"), {}).status_code == 409
    assert exception_handler(TooLargeError("too big"), {}).status_code == 413


def test_the_api_leaves_other_errors_to_drf():
    assert exception_handler(KeyError("x"), {}) is None


class _Form(forms.Form):
    temperature = forms.FloatField()
    seeds = forms.CharField()


def test_a_page_form_puts_the_error_next_to_the_field_it_names():
    form = _Form()
    assert error_field(form, ShiftlabError("bad", field="seeds")) == "seeds"
    assert error_field(form, ShiftlabError("temperature must be at most 2")) == "temperature"
    assert error_field(form, ShiftlabError("--seeds=1 conflicts with the preset")) == "seeds"
    assert error_field(form, ShiftlabError("Something else went wrong")) is None


class _Refusing(ShiftlabCommand):
    def handle(self, *args, **options):
        raise ShiftlabError("No dataset 'x': import it first.")


def test_a_command_turns_a_shiftlab_error_into_a_command_error():
    with pytest.raises(CommandError, match="No dataset 'x': import it first."):
        _Refusing().execute(no_color=True, force_color=False, skip_checks=True, stdout=None, stderr=None)
