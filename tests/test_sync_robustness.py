"""Syncs that never lose or invent a rating (issue 14), against a real local Argilla server:
answers off the question's scale, an older fetch arriving after a newer answer was stored, NUL
characters in comments, two syncs of one study at once, and a baseline study's withdrawn answer.

Argilla validates rating values against the question's options, and refuses to change the options
of a rating question once created. The off-scale answers are therefore real ones: the test builds
each annotator's dataset itself with a wider quality scale (0-9) than the study's (1-5) and an extra
question the study does not have, as a dataset edited or rebuilt outside Shiftlab would be.

An older fetch is a real one too: the dataset's records as the server returned them earlier,
replayed by an ``httpx.MockTransport`` client (``snapshot``, ``replay``), or a real fetch held back
while an annotator answers and another sync runs (``held_back``).

The PostgreSQL pass (``DATABASE_URL=postgres://...``, as ``scripts/test.sh`` runs it) is the one
that matters for NUL characters and for the lock that serialises two syncs.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable

import httpx
import pytest
from django.conf import settings as django_settings
from django.db import connection

from annotation.argilla import client as argilla
from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create, baseline_publish
from annotation.baselines.baseline_sync_services import baseline_sync
from annotation.models import Annotator, BaselineAnnotator, BaselineAnswer, Rating, RatingComment, Study
from annotation.selectors import baseline_rater_counts
from annotation.studies.sync_services import study_sync, sync_summary
from core.models import AuditEvent, Project
from core.roles import Role
from corpora.services import dataset_import
from tests.support import argilla_annotator_client, make_user, published_keyword_study

pytestmark = pytest.mark.heavy

WIDE_QUALITY = tuple(range(10))  # the study's quality scale is 1-5


def _argilla(settings, argilla_server) -> httpx.Client:
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    return argilla.client_get()


def _study_in_argilla(owner: httpx.Client, researcher, django_user_model, name: str, usernames: tuple[str, ...]):
    """A published study whose annotators each have their own dataset holding every item, with a
    0-9 quality scale, the study's fluency scale, an optional extra question and the comment."""
    study = published_keyword_study(researcher=researcher, name=name, limit=4, items=4, batch_size=4)
    workspace = name
    argilla.workspace_ensure(workspace, client=owner)
    clients, records = {}, {}
    for username in usernames:
        user = make_user(django_user_model, username, Role.ANNOTATOR)
        user_id = argilla.user_ensure(username, secrets.token_urlsafe(12), "annotator", workspace, client=owner)
        dataset_id = argilla.dataset_create(
            client=owner,
            workspace=workspace,
            name=f"{name}-{username}",
            fields=[argilla.TextField("original", "Original"), argilla.TextField("transformed", "Transformed")],
            rating_questions=[
                argilla.RatingQuestion("quality", "Meaning kept?", WIDE_QUALITY),
                argilla.RatingQuestion("fluency", "Fluent?", (1, 2, 3, 4, 5)),
            ],
            questions=[argilla.TextQuestion("clarity", "Anything unclear?", required=False)],
            comment_question="Comment",
            guidelines="Rate each pair.",
            min_submitted=1,
        )
        argilla.records_log(
            dataset_id,
            [
                argilla.RecordIn(item.external_id, {"original": item.text_a, "transformed": item.text_b})
                for item in study.items.all()
            ],
            client=owner,
        )
        Annotator.objects.create(study=study, user=user, argilla_user_id=user_id, argilla_dataset_id=dataset_id)
        clients[username] = argilla_annotator_client(owner, user_id)
        page = owner.get(f"/api/v1/datasets/{dataset_id}/records", params={"limit": 1000}).raise_for_status()
        records[username] = {r["external_id"]: r["id"] for r in page.json()["items"]}
    return Study.objects.get(pk=study.pk), clients, records


def _values(answers: dict) -> dict:
    return {question: {"value": value} for question, value in answers.items()}


def respond(client: httpx.Client, record_id: str, answers: dict, status: str = "submitted") -> str:
    body = {"status": status, "values": _values(answers)}
    return client.post(f"/api/v1/records/{record_id}/responses", json=body).raise_for_status().json()["id"]


def edit(client: httpx.Client, response_id: str, answers: dict, status: str = "submitted") -> None:
    body = {"status": status, "values": _values(answers)}
    client.put(f"/api/v1/responses/{response_id}", json=body).raise_for_status()


def snapshot(owner: httpx.Client, study: Study) -> dict[str, dict]:
    """The records of each of the study's datasets, with their responses, as Argilla returns them now."""
    params = {"include": "responses", "offset": 0, "limit": 1000}
    return {
        str(a.argilla_dataset_id): owner.get(f"/api/v1/datasets/{a.argilla_dataset_id}/records", params=params)
        .raise_for_status()
        .json()
        for a in study.annotators.all()
    }


def replay(owner: httpx.Client, pages: dict[str, dict]) -> httpx.Client:
    """A client that answers the sync's reads with an earlier ``snapshot``: an older fetch."""

    def handle(request: httpx.Request) -> httpx.Response:
        dataset_id = request.url.path.split("/")[4]
        return httpx.Response(200, json=pages[dataset_id])

    return httpx.Client(base_url=owner.base_url, transport=httpx.MockTransport(handle))


class HeldBack(httpx.BaseTransport):
    """The real server, but the first answer is held back until ``meanwhile`` has run: a slow
    fetch that started before what ``meanwhile`` does in Argilla and in the database."""

    def __init__(self, meanwhile: Callable[[], None]):
        self.inner, self.meanwhile = httpx.HTTPTransport(), meanwhile

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        meanwhile, self.meanwhile = self.meanwhile, None
        if meanwhile is not None:
            meanwhile()
        return response


def held_back(argilla_server, meanwhile: Callable[[], None]) -> httpx.Client:
    headers = {argilla.API_KEY_HEADER: argilla_server.api_key}
    return httpx.Client(base_url=argilla_server.url, headers=headers, transport=HeldBack(meanwhile), trust_env=False)


def stored(study: Study) -> dict[tuple[str, str, str], int]:
    """The active ratings, as (item external id, username, question) -> value."""
    return {
        (r.study_item.external_id, r.annotator.user.username, r.question): r.value
        for r in Rating.objects.filter(study_item__study=study, active=True).select_related(
            "study_item", "annotator__user"
        )
    }


@pytest.mark.django_db
def test_answers_off_the_scale_are_reported_and_leave_the_rating(
    argilla_server, settings, researcher, django_user_model
):
    owner = _argilla(settings, argilla_server)
    study, clients, records = _study_in_argilla(owner, researcher, django_user_model, "sync-scale", ("sc-anna",))
    anna, ids = clients["sc-anna"], records["sc-anna"]
    first, second = sorted(ids)[:2]
    response = respond(anna, ids[first], {"quality": 4, "fluency": 4, "comment": "fine\x00 really"})
    respond(anna, ids[second], {"quality": 0, "fluency": 5, "clarity": "what is meant?"})

    # Quality 0 is off the study's 1-5 scale and clarity is no question of the study: both are
    # reported, neither is stored; the NUL character is removed from the comment, which is kept.
    result = study_sync(study=study)
    assert (result.created, result.invalid, result.nul_stripped) == (3, 2, 1)
    assert RatingComment.objects.get(study_item__external_id=first).text == "fine really"
    assert stored(study) == {
        (first, "sc-anna", "quality"): 4,
        (first, "sc-anna", "fluency"): 4,
        (second, "sc-anna", "fluency"): 5,
    }
    summary = sync_summary(Study.objects.get(pk=study.pk).last_sync)
    assert (
        "2 answers outside the question's scale ignored" in summary
        and "NUL characters removed from 1 comment" in summary
    )

    # An edit to 7 (off the scale) leaves the stored 4 as it was: not withdrawn, not changed.
    edit(anna, response, {"quality": 7, "fluency": 4, "comment": "fine really"})
    result = study_sync(study=study)
    assert (result.created, result.updated, result.withdrawn, result.invalid) == (0, 0, 0, 3)
    rating = Rating.objects.get(study_item__external_id=first, question="quality")
    assert (rating.value, rating.active, rating.edits, rating.revisions.count()) == (4, True, 0, 1)

    # Each invalid answer is audited once, with the item, annotator, question and raw value.
    assert study_sync(study=study).invalid == 3
    events = AuditEvent.objects.filter(verb="study.sync.invalid", object_id=str(study.pk)).order_by("id")
    listed = [
        (e["item"], e["annotator"], e["question"], e["value"]) for event in events for e in event.payload["answers"]
    ]
    assert sorted(listed) == sorted(
        [
            (second, "sc-anna", "quality", "0"),
            (second, "sc-anna", "clarity", "'what is meant?'"),
            (first, "sc-anna", "quality", "7"),
        ]
    )
    assert [event.payload["invalid"] for event in events] == [2, 3]

    # A value back on the scale is an ordinary edit.
    edit(anna, response, {"quality": 2, "fluency": 4})
    assert study_sync(study=study).updated == 1
    rating.refresh_from_db()
    assert (rating.value, rating.edits, rating.revisions.count()) == (2, 1, 2)
    owner.close()
    anna.close()


@pytest.mark.django_db
def test_an_older_fetch_never_replaces_a_newer_answer(argilla_server, settings, researcher, django_user_model):
    owner = _argilla(settings, argilla_server)
    study, clients, records = _study_in_argilla(owner, researcher, django_user_model, "sync-race", ("rc-ben",))
    ben, ids = clients["rc-ben"], records["rc-ben"]
    first, second, third = sorted(ids)[:3]

    # Ben answers 3, the edit to 5 is stored; a fetch from before the edit then arrives.
    response = respond(ben, ids[first], {"quality": 3, "fluency": 3})
    before_edit = snapshot(owner, study)
    edit(ben, response, {"quality": 5, "fluency": 3})
    assert study_sync(study=study).created == 2
    result = study_sync(study=study, client=replay(owner, before_edit))
    assert (result.updated, result.withdrawn, result.stale, result.unchanged) == (0, 0, 1, 1)
    assert stored(study) == {(first, "rc-ben", "quality"): 5, (first, "rc-ben", "fluency"): 3}

    # A discard seen by an old fetch does not withdraw the submission that followed it.
    edit(ben, response, {"quality": 5, "fluency": 3}, status="discarded")
    discarded = snapshot(owner, study)
    edit(ben, response, {"quality": 2, "fluency": 3})
    assert study_sync(study=study).updated == 1
    result = study_sync(study=study, client=replay(owner, discarded))
    assert (result.withdrawn, result.stale) == (0, 2)
    assert stored(study) == {(first, "rc-ben", "quality"): 2, (first, "rc-ben", "fluency"): 3}

    # A slow sync whose fetch started before Ben answered another record, and which writes after a
    # quicker sync stored that answer, neither withdraws nor repeats it.
    def meanwhile():
        respond(ben, ids[second], {"quality": 4, "fluency": 4})
        assert study_sync(study=study).created == 2

    slow = study_sync(study=study, client=held_back(argilla_server, meanwhile))
    assert (slow.created, slow.updated, slow.withdrawn) == (0, 0, 0)
    expected = {
        (first, "rc-ben", "quality"): 2,
        (first, "rc-ben", "fluency"): 3,
        (second, "rc-ben", "quality"): 4,
        (second, "rc-ben", "fluency"): 4,
    }
    assert stored(study) == expected

    # A deleted response is withdrawn ('missing', at the start of the fetch that missed it); a
    # fetch from before the deletion does not bring it back.
    gone = respond(ben, ids[third], {"quality": 1, "fluency": 1})
    assert study_sync(study=study).created == 2
    before_delete = snapshot(owner, study)
    ben.delete(f"/api/v1/responses/{gone}").raise_for_status()
    assert study_sync(study=study).withdrawn == 2
    study.refresh_from_db()
    last = Rating.objects.get(study_item__external_id=third, question="quality").revisions.last()
    assert (last.status, last.value, last.argilla_updated_at) == ("missing", None, study.synced_at)
    result = study_sync(study=study, client=replay(owner, before_delete))
    assert (result.updated, result.created, result.stale) == (0, 0, 2)
    assert stored(study) == expected
    owner.close()
    ben.close()


@pytest.mark.django_db(transaction=True)
def test_two_syncs_at_once_lose_duplicate_and_invent_nothing(argilla_server, settings, django_user_model):
    """Two syncs of one study in two threads, started together, while one annotator edits. On
    PostgreSQL the second sync's fetch starts only once the first one has committed (the advisory
    lock); on SQLite the fetches may overlap and only the writes are serialised."""
    owner = _argilla(settings, argilla_server)
    researcher = make_user(django_user_model, "rita", Role.RESEARCHER)
    names = ("tw-cora", "tw-dan")
    study, clients, records = _study_in_argilla(owner, researcher, django_user_model, "sync-twice", names)
    answered: dict[tuple[str, str, str], int] = {}
    responses = {}
    for k, name in enumerate(names):
        for j, external_id in enumerate(sorted(records[name])):
            answers = {"quality": 1 + (j + k) % 5, "fluency": 1 + (2 * j + k) % 5}
            responses[(name, external_id)] = respond(clients[name], records[name][external_id], answers)
            answered.update({(external_id, name, q): v for q, v in answers.items()})

    barrier = threading.Barrier(2)
    results, seen_at_fetch, errors = {}, {}, []

    def sync(label: str) -> None:
        def first_request(request: httpx.Request) -> None:
            # What this sync's fetch finds stored when it starts (its own database connection).
            seen_at_fetch.setdefault(label, Rating.objects.filter(study_item__study=study).count())

        try:
            client = argilla.client_get()
            client.event_hooks = {"request": [first_request], "response": []}
            barrier.wait(timeout=30)
            results[label] = study_sync(study=study, client=client)
            client.close()
        except Exception as exc:  # the assertions below say which thread failed
            errors.append(f"{label}: {exc!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=sync, args=(label,)) for label in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    created = sorted(r.created for r in results.values())
    if connection.vendor == "postgresql":  # one after the other: the second fetch finds the first's ratings
        assert created == [0, len(answered)] and sorted(seen_at_fetch.values()) == [0, len(answered)]
    else:
        assert sum(created) == len(answered)
    assert Rating.objects.filter(study_item__study=study).count() == len(answered)  # nothing duplicated
    assert stored(study) == answered  # nothing lost, nothing invented

    # An edit made while two more syncs run is in the ratings once both are done.
    edited = sorted(records["tw-dan"])[0]
    barrier.reset()
    threads = [threading.Thread(target=sync, args=(label,)) for label in ("c", "d")]
    for thread in threads:
        thread.start()
    edit(clients["tw-dan"], responses[("tw-dan", edited)], {"quality": 5, "fluency": 5})
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    study_sync(study=study)
    answered.update({(edited, "tw-dan", "quality"): 5, (edited, "tw-dan", "fluency"): 5})
    assert stored(study) == answered
    assert Rating.objects.filter(study_item__study=study).count() == len(answered)
    owner.close()
    for client in clients.values():
        client.close()


@pytest.mark.django_db
def test_a_withdrawn_baseline_answer_keeps_its_history(argilla_server, settings, django_user_model):
    owner = _argilla(settings, argilla_server)
    team = Project.objects.create(slug="bl-history")
    user = make_user(django_user_model, "bl-eve", Role.ANNOTATOR, roster=team)
    demo = django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
    sts = dataset_import(source=demo, task="sts", name="demo-sts", project=team)
    study = baseline_create(
        request=BaselineCreateRequest(
            name="bl-history",
            dataset=sts,
            task_type="sts",
            n_instances=3,
            split=next(iter(sts.splits)),
            project=team.slug,
            options={"raters_per_instance": 1},
        )
    )
    baseline_publish(study=study, annotators=[user])
    dataset_id = BaselineAnnotator.objects.get(study=study, user=user).argilla_dataset_id  # their own
    eve = argilla_annotator_client(owner, argilla.user_get_id("bl-eve", client=owner))
    page = owner.get(f"/api/v1/datasets/{dataset_id}/records", params={"limit": 100}).raise_for_status()
    ids = {r["external_id"]: r["id"] for r in page.json()["items"]}
    kept, changed, deleted = sorted(ids)
    responses = {key: respond(eve, ids[key], {"similarity": 3}) for key in (kept, changed, deleted)}
    assert baseline_sync(study=study).created == 3

    # Discarded, then submitted again with another value; another one deleted outright.
    edit(eve, responses[changed], {"similarity": 3}, status="discarded")
    eve.delete(f"/api/v1/responses/{responses[deleted]}").raise_for_status()
    result = baseline_sync(study=study)
    assert (result.withdrawn, result.unchanged) == (2, 1)
    assert [c.answers for c in baseline_rater_counts(study=study)] == [1]  # only current answers count
    edit(eve, responses[changed], {"similarity": 5})
    assert baseline_sync(study=study).updated == 1

    answers = {
        a.instance.key: a for a in BaselineAnswer.objects.filter(instance__study=study).select_related("instance")
    }
    assert {key: (a.value, a.active) for key, a in answers.items()} == {
        kept: (3.0, True),
        changed: (5.0, True),
        deleted: (3.0, False),
    }
    history = {key: [(r.value, r.status) for r in a.revisions.all()] for key, a in answers.items()}
    assert history == {
        kept: [(3.0, "submitted")],
        changed: [(3.0, "submitted"), (None, "discarded"), (5.0, "submitted")],
        deleted: [(3.0, "submitted"), (None, "missing")],
    }
    assert baseline_sync(study=study).changed == 0
    owner.close()
    eve.close()
