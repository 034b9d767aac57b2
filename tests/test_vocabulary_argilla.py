"""Argilla names annotators read (issue 42): their workspace (Argilla's breadcrumb) and dataset name
the study, its version and them in words, stay unique across projects, and a dataset created under
the older key name is still found, not doubled. The Argilla calls are replaced by recorders: the
live-server tests (``tests/test_baseline_isolation.py``...) publish through the real ones."""

from __future__ import annotations

import uuid

import pytest

from annotation.argilla import client as argilla
from annotation.studies import argilla_services
from annotation.studies.argilla_services import (
    ARGILLA_NAME_MAX,
    annotator_dataset_ensure,
    annotator_dataset_name,
    annotator_workspace,
)
from core.roles import Role
from tests.support import make_user, published_keyword_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(researcher):
    return published_keyword_study(researcher=researcher, name="ux-para", limit=4, items=4, batch_size=4)


def test_workspace_and_dataset_read_as_the_study_and_the_annotator(study, django_user_model):
    anna = make_user(django_user_model, "uxann1", Role.ANNOTATOR)
    assert annotator_workspace(study, anna) == f"ux-para v1 · uxann1 · project {study.project.slug} (study {study.pk})"
    assert annotator_dataset_name(study, anna) == "ux-para v1: items for uxann1"


def test_a_name_past_argillas_limit_falls_back_to_the_key_form(researcher, django_user_model):
    study = published_keyword_study(researcher=researcher, name="s" * 61, limit=4, items=4, batch_size=4)
    long_name = make_user(django_user_model, "a" * 150, Role.ANNOTATOR)
    workspace = annotator_workspace(study, long_name)
    assert len(workspace) <= ARGILLA_NAME_MAX and workspace.startswith(f"{'s' * 61}-v1-s{study.pk}-")
    assert len(annotator_dataset_name(study, long_name)) <= ARGILLA_NAME_MAX


def test_a_dataset_created_under_the_older_key_name_is_found_not_doubled(study, django_user_model, monkeypatch):
    anna = make_user(django_user_model, "uxann1", Role.ANNOTATOR)
    legacy = uuid.uuid4()
    created = []
    monkeypatch.setattr(argilla, "workspace_ensure", lambda name, *, client: uuid.uuid4())
    monkeypatch.setattr(argilla, "user_ensure", lambda *args, client: uuid.uuid4())
    monkeypatch.setattr(
        argilla, "dataset_find", lambda workspace, name, *, client: legacy if name == study.argilla_name else None
    )
    monkeypatch.setattr(argilla, "dataset_create", lambda **kwargs: created.append(kwargs["name"]) or uuid.uuid4())
    ensure = dict(workspace="", dataset_id=None, spec={}, roles={}, new_accounts=[], client=None)
    assert annotator_dataset_ensure(study, anna, **ensure).dataset_id == legacy and created == []

    monkeypatch.setattr(argilla, "dataset_find", lambda workspace, name, *, client: None)
    placed = annotator_dataset_ensure(study, anna, **ensure)
    assert created == ["ux-para v1: items for uxann1"]
    assert placed.workspace == argilla_services.annotator_workspace(study, anna)
