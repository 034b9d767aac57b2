"""The three error boundaries render a ShiftlabError alike, by its class and field: API, page, command.

And no door catches a ShiftlabError itself: views, the admin and management commands leave it to
their interface's one boundary (``core.api_errors``, ``core.pages.refusals``, ``ShiftlabCommand``).
"""

import ast
import importlib
from pathlib import Path

import pytest
from django import forms
from django.contrib.messages import get_messages
from django.contrib.messages.storage.cookie import CookieStorage
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError
from django.http import Http404
from django.test import RequestFactory

from core.api_errors import exception_handler
from core.commands import ShiftlabCommand
from core.errors import (
    ConflictError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
    ShiftlabError,
    TooLargeError,
)
from core.pages import refusals
from core.projects import ProjectAccessError

ROOT = Path(__file__).resolve().parent.parent
APPS = ("core", "corpora", "transforms", "annotation", "evaluation", "shiftlab")


# --- the classes --------------------------------------------------------------------------------


def test_the_class_gives_the_status_and_a_default_code():
    cases = {
        ShiftlabError: (400, "invalid"),
        InvalidError: (400, "invalid"),
        ForbiddenError: (403, "forbidden"),
        NotFoundError: (404, "not_found"),
        ConflictError: (409, "conflict"),
        TooLargeError: (413, "too_large"),
    }
    for cls, (status, code) in cases.items():
        exc = cls("x")
        assert (exc.http_status, exc.code, exc.field) == (status, code, None)
    assert ConflictError("x", code="dataset_in_use").code == "dataset_in_use"
    assert ConflictError.code == "conflict"  # a code given where it is raised stays on that error


def test_a_project_access_error_is_a_forbidden_error_and_a_permission_denied():
    exc = ProjectAccessError("You may only read project 'alpha'.")
    assert isinstance(exc, ForbiddenError) and isinstance(exc, PermissionDenied)
    assert (exc.http_status, exc.code) == (403, "forbidden")


# --- the API ------------------------------------------------------------------------------------


def test_the_api_answers_a_shiftlab_error_with_its_status_field_and_code():
    plain = exception_handler(ShiftlabError("seeds need a config"), {})
    assert (plain.status_code, plain.data) == (400, {"detail": "seeds need a config", "code": "invalid"})
    named = exception_handler(NotFoundError("No project 'x'.", field="project", code="no_project"), {})
    assert (named.status_code, named.data) == (404, {"project": ["No project 'x'."], "code": "no_project"})
    assert exception_handler(ConflictError("in use"), {}).status_code == 409
    assert exception_handler(TooLargeError("too big"), {}).data["code"] == "too_large"
    forbidden = exception_handler(ProjectAccessError("read only"), {})
    assert (forbidden.status_code, forbidden.data) == (403, {"detail": "read only", "code": "forbidden"})


def test_the_api_leaves_other_errors_to_drf():
    assert exception_handler(KeyError("x"), {}) is None


# --- pages --------------------------------------------------------------------------------------


class _Form(forms.Form):
    temperature = forms.FloatField(required=False)
    seeds = forms.CharField(required=False)


class _PlacingForm(_Form):
    def add_refusal(self, exc):
        self.add_error("temperature", f"placed: {exc}")


def _request():
    request = RequestFactory().post("/somewhere/")
    request._messages = CookieStorage(request)
    return request


def _refused(exc, form=None, **options):
    request = _request()
    with refusals(request, form, **options) as refused:
        raise exc
    return refused, [str(m) for m in get_messages(request)]


def test_a_page_puts_the_error_on_the_field_it_names():
    form = _Form({})
    refused, said = _refused(ShiftlabError("bad", field="seeds"), form)
    assert refused and refused.message == "bad"
    assert form.errors == {"seeds": ["bad"]} and said == []


def test_a_page_never_reads_the_message_for_a_field():
    form = _Form({})
    _refused(ShiftlabError("temperature must be at most 2"), form)  # no field named: above the form
    assert form.non_field_errors() == ["temperature must be at most 2"]
    assert "temperature" not in form.errors


def test_without_a_form_a_refusal_is_an_error_message():
    refused, said = _refused(ConflictError("flag 3 was already confirmed"))
    assert refused.error.code == "conflict" and said == ["flag 3 was already confirmed"]


def test_a_form_may_place_a_refusal_itself():
    form = _PlacingForm({})
    _refused(ShiftlabError("no judge", field="seeds"), form)
    assert form.errors == {"temperature": ["placed: no judge"]}


def test_a_page_answers_not_found_with_404_unless_a_field_of_its_form_is_named():
    with pytest.raises(Http404):
        _refused(NotFoundError("No project 'x'.", field="project"))
    with pytest.raises(Http404):
        _refused(NotFoundError("no such run"), _Form({}))
    form = _Form({})
    _refused(NotFoundError("No dataset named 'x'.", field="seeds"), form)
    assert form.errors == {"seeds": ["No dataset named 'x'."]}


def test_a_page_answers_forbidden_with_403():
    with pytest.raises(PermissionDenied):
        _refused(ForbiddenError("Only admins create projects."), _Form({}))
    access = ProjectAccessError("You may only read project 'alpha'.")
    with pytest.raises(ProjectAccessError) as raised:
        _refused(access, _Form({}), show=False)  # 403 even where the page shows the refusal itself
    assert raised.value is access


def test_show_false_records_the_refusal_without_showing_it():
    refused, said = _refused(NotFoundError("no baseline report yet"), show=False)
    assert refused.message == "no baseline report yet" and said == []
    request = _request()
    with refusals(request) as fine:
        pass
    assert not fine and fine.message == ""


def test_the_block_stops_at_the_refusal():
    done = []
    with refusals(_request()):
        raise ShiftlabError("no")
        done.append("after")  # never reached: the refusal ends the block
    assert done == []


# --- commands -----------------------------------------------------------------------------------


class _Refusing(ShiftlabCommand):
    heading = ""

    def handle(self, *args, **options):
        self.refused_heading = self.heading
        raise NotFoundError("No dataset 'x': import it first.")


def _execute(command):
    command.execute(no_color=True, force_color=False, skip_checks=True, stdout=None, stderr=None)


def test_a_command_turns_a_shiftlab_error_into_a_command_error():
    with pytest.raises(CommandError, match="^No dataset 'x': import it first.$"):
        _execute(_Refusing())


def test_a_command_may_say_a_heading_before_the_refusal():
    command = _Refusing()
    command.heading = "Nothing was imported."
    with pytest.raises(CommandError) as refused:
        _execute(command)
    assert str(refused.value) == "Nothing was imported.\nNo dataset 'x': import it first."


# --- no door catches a ShiftlabError ------------------------------------------------------------


def _doors() -> list[Path]:
    """Views modules (pages), admin modules and management commands of every app."""
    found = []
    for app in APPS:
        base = ROOT / app
        found += [p for p in base.rglob("*.py") if p.name == "views.py" or p.name.endswith("_views.py")]
        found += [p for p in base.rglob("admin.py")]
        found += [p for p in (base / "management" / "commands").glob("*.py") if p.name != "__init__.py"]
    return sorted(p for p in found if "/test" not in str(p.relative_to(ROOT)))


def _caught_names(handler: ast.ExceptHandler) -> list[str]:
    if handler.type is None:
        return []
    nodes = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return [ast.unparse(node) for node in nodes]


def _resolve(module, dotted: str):
    value = module
    for part in dotted.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def test_the_doors_are_found():
    doors = {str(p.relative_to(ROOT)) for p in _doors()}
    assert {"annotation/views.py", "core/views.py", "evaluation/baseline_views.py"} <= doors
    assert "corpora/management/commands/corpora.py" in doors


def test_no_door_catches_a_shiftlab_error_itself():
    """A view, an admin or a command that catches a ShiftlabError (or one of its classes) renders it
    by hand: it must leave it to ``core.pages.refusals`` / the DRF handler / ``ShiftlabCommand``."""
    offenders = []
    for path in _doors():
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = importlib.import_module(name)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ExceptHandler):
                continue
            for caught in _caught_names(node):
                cls = _resolve(module, caught)
                if caught == "ShiftlabError" or (isinstance(cls, type) and issubclass(cls, ShiftlabError)):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} catches {caught}")
    assert offenders == []


def test_the_scan_would_see_a_door_that_catches_one():
    source = "try:\n    pass\nexcept (KeyError, ShiftlabError):\n    pass\n"
    handler = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ExceptHandler))
    assert _caught_names(handler) == ["KeyError", "ShiftlabError"]
