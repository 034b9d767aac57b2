"""Human performance baselines end to end, with real services: STS-B and Banking77 samples are
published to a local Argilla server, three annotators answer through Argilla's REST API with their
own keys, answers are synced (twice, idempotently) and scored with the evaluation code; and the
small llama.cpp model answers an STS sample as an LLM annotator.
"""

from __future__ import annotations

import csv
import io
import json
import time

import httpx
import numpy as np
import pytest
from django.core.management import call_command

from annotation.argilla import client as argilla
from annotation.argilla.display import Shown, from_argilla
from annotation.baselines.baseline_llm_services import baseline_llm_annotate
from annotation.baselines.baseline_services import (
    BaselineCreateRequest,
    baseline_close,
    baseline_create,
    baseline_publish,
)
from annotation.baselines.baseline_sync_services import baseline_sync
from annotation.models import BaselineAnnotator, BaselineAnswer, BaselineStudy
from core.errors import ShiftlabError
from core.models import AuditEvent, Project
from core.projects import project_create
from core.roles import Role
from corpora.services import ImportOptions, dataset_import
from tests.support import argilla_annotator_client, argilla_pending, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.services]

ANNOTATORS = ("hb-ann-a", "hb-ann-b", "hb-ann-c")
HIDDEN_WORDS = ("gold", "label", "score", "expected", "answer", "correct")
RECORD_KEYS = {
    "id",
    "status",
    "fields",
    "metadata",
    "external_id",
    "responses",
    "suggestions",
    "vectors",
    "dataset_id",
    "inserted_at",
    "updated_at",
}


def import_stsb(shared_data, tmp_path, n: int = 30, project: Project | None = None):
    """The first ``n`` pairs of the STS-B English test split (headerless sentence1,sentence2,score)."""
    lines = (shared_data / "stsb-multi-mt/stsb-en-test.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "stsb-en-test-30.csv"
    path.write_text("".join(lines[:n]), encoding="utf-8")
    return dataset_import(
        source=path,
        task="sts",
        name="stsb-en-test-30",
        options=ImportOptions(columns=["sentence1", "sentence2", "score"]),
        project=project,
    )


def import_banking77(shared_data, tmp_path, n_test: int = 40, project: Project | None = None):
    """Banking77's full train split (so the dataset has all 77 labels) and a seeded draw of
    ``n_test`` test rows (the test file is sorted by label: its head would hold one label)."""
    folder = tmp_path / "banking77-small"
    folder.mkdir()
    (folder / "train.csv").write_bytes((shared_data / "banking77/train.csv").read_bytes())
    with (shared_data / "banking77/test.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    picks = sorted(np.random.default_rng(77).choice(len(rows), size=n_test, replace=False))
    with (folder / "test.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["text", "category"])
        writer.writeheader()
        writer.writerows(rows[int(i)] for i in picks)
    return dataset_import(
        source=folder,
        task="classification",
        name="banking77-small",
        options=ImportOptions(field_map={"label": "category"}),
        project=project,
    )


def annotator_client(owner: httpx.Client, username: str) -> httpx.Client:
    return argilla_annotator_client(owner, argilla.user_get_id(username, client=owner))


def own_dataset(study: BaselineStudy, username: str):
    """The annotator's own dataset of the study (each annotator has one, in their own workspace)."""
    return BaselineAnnotator.objects.get(study=study, user__username=username).argilla_dataset_id


def pending(client: httpx.Client, dataset_id) -> list[dict]:
    return argilla_pending(client, dataset_id, include=("responses", "suggestions", "vectors"))


def respond(client: httpx.Client, record_id, status: str, values: dict) -> dict:
    body = {"status": status, "values": {q: {"value": v} for q, v in values.items()}}
    return client.post(f"/api/v1/records/{record_id}/responses", json=body).raise_for_status().json()


def sts_answer(gold: float, rater: int) -> int:
    """A careful rater: the gold rounded, nudged by one point on some pairs, differently per rater."""
    nudge = (-1, 0, 1)[(int(gold * 10) + rater) % 3] if (int(gold * 10) + rater) % 4 == 0 else 0
    return int(min(5, max(0, round(gold) + nudge)))


def label_answer(gold: str, labels: list[str], k: int, rater: int) -> str:
    """Right most of the time; every seventh text (shifted per rater) gets a neighbouring label."""
    return gold if (k + rater) % 7 else labels[(labels.index(gold) + 1) % len(labels)]


def assert_nothing_hidden_leaks(
    client: httpx.Client, dataset_id, records: list[dict], study: BaselineStudy, fields: tuple[str, ...]
) -> None:
    """What an annotator can read of the dataset: the instance key and the texts, never the gold."""
    instances = {i.key: i for i in study.instances.all()}
    assert {r["external_id"] for r in records} == set(instances)
    for record in records:
        instance = instances[record["external_id"]]
        assert set(record) <= RECORD_KEYS, set(record) - RECORD_KEYS
        shown = {name: from_argilla(text, Shown.HTML) for name, text in record["fields"].items()}
        assert shown == dict(zip(fields, instance.texts, strict=True))
        assert not record.get("metadata") and not record.get("suggestions") and not record.get("vectors")
        assert not record.get("responses")
        visible = json.dumps({k: v for k, v in record.items() if k != "fields"}).lower()
        assert not any(word in visible for word in HIDDEN_WORDS), visible
        if study.task_type == "classification":  # the label is nowhere in what the annotator reads
            assert instance.gold not in json.dumps(record)
    base = f"/api/v1/me/datasets/{dataset_id}"
    assert client.get(f"{base}/metadata-properties").raise_for_status().json()["items"] == []
    dataset = client.get(f"/api/v1/datasets/{dataset_id}").raise_for_status().json()
    assert from_argilla(dataset["guidelines"], Shown.MARKDOWN) == study.instructions
    assert "gold" not in dataset["guidelines"].lower()


def test_human_baseline_end_to_end(argilla_server, settings, django_user_model, shared_data, tmp_path):
    started = time.monotonic()
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    # Its slug is also the Argilla workspace: apart from other tests'.
    team = project_create(slug="hb-project", owner=rita, actor=None)
    users = [make_user(django_user_model, name, Role.ANNOTATOR, roster=team) for name in ANNOTATORS]
    sts = import_stsb(shared_data, tmp_path, project=team)
    banking = import_banking77(shared_data, tmp_path, project=team)
    t_import = time.monotonic() - started
    assert sts.n_items == 30 and banking.splits["test"] == 40

    sts_study = baseline_create(
        actor=rita,
        request=BaselineCreateRequest(
            name="hb-stsb", dataset=sts, task_type="sts", n_instances=30, seed=3, project=team.slug
        ),
    )
    cls_study = baseline_create(
        actor=rita,
        request=BaselineCreateRequest(
            name="hb-banking", dataset=banking, task_type="classification", n_instances=40, seed=3, project=team.slug
        ),
    )
    labels = cls_study.options["labels"]
    assert len(labels) == 77 and labels == sorted(labels)
    assert cls_study.instances.count() == 40 and sts_study.instances.count() == 30

    # Publish twice: the second run creates no account and no record. With three raters per
    # instance and three annotators, each annotator's own dataset holds every instance.
    first = baseline_publish(study=sts_study, annotators=users, actor=rita)
    assert set(first.new_accounts) == set(ANNOTATORS) and first.records == 3 * 30
    assert baseline_publish(study=sts_study, annotators=users, actor=rita).new_accounts == ()
    assert baseline_publish(study=cls_study, annotators=users, actor=rita).new_accounts == ()
    sts_study.refresh_from_db()
    cls_study.refresh_from_db()
    assert sts_study.status == cls_study.status == BaselineStudy.Status.PUBLISHED
    owner = argilla.client_get()
    for study, n in ((sts_study, 30), (cls_study, 40)):
        for name in ANNOTATORS:
            dataset_id = own_dataset(study, name)
            total = owner.get(f"/api/v1/datasets/{dataset_id}/records", params={"limit": 1}).json()["total"]
            assert total == n
    questions = owner.get(f"/api/v1/datasets/{own_dataset(cls_study, ANNOTATORS[0])}/questions").json()["items"]
    assert [(q["name"], q["settings"]["type"]) for q in questions] == [("label", "label_selection")]
    assert [o["value"] for o in questions[0]["settings"]["options"]] == labels
    questions = owner.get(f"/api/v1/datasets/{own_dataset(sts_study, ANNOTATORS[0])}/questions").json()["items"]
    assert [(q["name"], q["settings"]["type"]) for q in questions] == [("similarity", "rating")]
    assert [o["value"] for o in questions[0]["settings"]["options"]] == [0, 1, 2, 3, 4, 5]

    # Three annotators answer every record through the REST API, as themselves.
    clients = {name: annotator_client(owner, name) for name in ANNOTATORS}
    sts_gold = {i.key: i.gold for i in sts_study.instances.all()}
    cls_gold = {i.key: i.gold for i in cls_study.instances.all()}
    expected: dict[tuple[str, str], object] = {}
    responses = {}
    for r, name in enumerate(ANNOTATORS):
        client = clients[name]
        sts_dataset, cls_dataset = own_dataset(sts_study, name), own_dataset(cls_study, name)
        records = pending(client, sts_dataset)
        if r == 0:
            assert_nothing_hidden_leaks(client, sts_dataset, records, sts_study, ("sentence1", "sentence2"))
        for record in records:
            value = sts_answer(sts_gold[record["external_id"]], r)
            responses[(name, record["external_id"])] = respond(client, record["id"], "submitted", {"similarity": value})
            expected[(name, record["external_id"])] = float(value)
        records = pending(client, cls_dataset)
        if r == 0:
            assert_nothing_hidden_leaks(client, cls_dataset, records, cls_study, ("text",))
        for k, record in enumerate(sorted(records, key=lambda rec: rec["external_id"])):
            value = label_answer(cls_gold[record["external_id"]], labels, k, r)
            respond(client, record["id"], "submitted", {"label": value})
            expected[(name, record["external_id"])] = value
        assert pending(client, sts_dataset) == []

    # Sync twice: every answer once, then nothing changes.
    for study, n in ((sts_study, 30), (cls_study, 40)):
        synced = baseline_sync(study=study)
        assert (synced.created, synced.updated, synced.withdrawn, synced.invalid) == (3 * n, 0, 0, 0)
        again = baseline_sync(study=study)
        assert (again.created, again.updated, again.withdrawn, again.unchanged) == (0, 0, 0, 3 * n)
        assert BaselineAnswer.objects.filter(instance__study=study).count() == 3 * n
    stored = {(a.rater, a.instance.key): a for a in BaselineAnswer.objects.select_related("instance", "user")}
    assert {k: a.value for k, a in stored.items()} == expected
    assert all(a.source == "human" and a.valid and a.user.username == a.rater for a in stored.values())

    # An edited answer is updated once; a discarded one stops counting.
    name, key = ANNOTATORS[1], sorted(sts_gold)[0]
    changed = 0.0 if expected[(name, key)] != 0.0 else 5.0
    response = responses[(name, key)]
    edit = {"status": "submitted", "values": {"similarity": {"value": int(changed)}}}
    clients[name].put(f"/api/v1/responses/{response['id']}", json=edit).raise_for_status()
    other = responses[(ANNOTATORS[2], sorted(sts_gold)[1])]
    clients[ANNOTATORS[2]].put(
        f"/api/v1/responses/{other['id']}", json={"status": "discarded", "values": other["values"]}
    ).raise_for_status()
    third = baseline_sync(study=sts_study)
    assert (third.created, third.updated, third.withdrawn, third.unchanged) == (0, 1, 1, 88)
    assert BaselineAnswer.objects.get(rater=name, instance__key=key, instance__study=sts_study).value == changed
    withdrawn = BaselineAnswer.objects.get(
        rater=ANNOTATORS[2], instance__key=sorted(sts_gold)[1], instance__study=sts_study
    )
    assert not withdrawn.active and [(r.value, r.status) for r in withdrawn.revisions.all()] == [
        (withdrawn.value, "submitted"),
        (None, "discarded"),
    ]
    assert baseline_sync(study=sts_study).changed == 0

    # The human scores, intervals and agreement, as the report service computes them (the evaluator
    # code models are scored with), against independent references: scipy, statsmodels, the formula.
    score = human_scores_match_references(sts_study, cls_study)

    out = tmp_path / "status.txt"
    with out.open("w") as handle:
        call_command("baseline", "status", "hb-banking", stdout=handle)
    text = out.read_text()
    for name in ANNOTATORS:
        assert f"{name}" in text and "40 answers" in text
    verbs = set(AuditEvent.objects.values_list("verb", flat=True))
    assert {"baseline.create", "baseline.publish", "baseline.publish.again", "baseline.sync"} <= verbs

    # Closing: a last sync, then the answers are final (no sync, no LLM answers, no second close).
    n_answers = BaselineAnswer.objects.filter(instance__study=sts_study).count()
    call_command("baseline", "close", "hb-stsb", stdout=io.StringIO())
    sts_study.refresh_from_db()
    assert sts_study.status == BaselineStudy.Status.CLOSED
    assert BaselineAnswer.objects.filter(instance__study=sts_study).count() == n_answers
    for refused in (
        lambda: baseline_sync(study=sts_study),
        lambda: baseline_llm_annotate(study=sts_study),
        lambda: baseline_close(study=sts_study),
    ):
        with pytest.raises(ShiftlabError, match="closed"):
            refused()
    assert AuditEvent.objects.filter(verb="baseline.close").count() == 1
    owner.close()
    for client in clients.values():
        client.close()
    print(
        f"\nbaseline e2e: import {t_import:.1f} s, whole test {time.monotonic() - started:.1f} s; "
        f"pooled human STS Spearman {score['sts']:.3f}, Banking77 accuracy {score['classification']:.3f}"
    )


def human_scores_match_references(sts_study, cls_study) -> dict[str, float]:
    from scipy import stats
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa
    from statsmodels.stats.proportion import proportion_confint

    from evaluation.baseline_services import baseline_report_build

    def answers_of(study):
        by_key: dict[str, dict[str, object]] = {}
        for a in BaselineAnswer.objects.filter(instance__study=study, source="human", active=True).select_related(
            "instance"
        ):
            by_key.setdefault(a.instance.key, {})[a.rater] = a.value
        gold = {i.key: i.gold for i in study.instances.all()}
        return by_key, gold

    # STS: Spearman of the mean rating with gold; 95% Fisher z interval with the Bonett-Wright SE.
    report = baseline_report_build(study=sts_study, models=[])
    rows = {row.name: row for row in report.rows}
    by_key, gold = answers_of(sts_study)
    keys = sorted(gold)
    rho = stats.spearmanr([np.mean(list(by_key[k].values())) for k in keys], [gold[k] for k in keys]).statistic
    half = stats.norm.ppf(0.975) * np.sqrt((1 + rho**2 / 2) / (len(keys) - 3))
    pooled = rows["humans (pooled)"]
    assert pooled.score == pytest.approx(rho)
    assert (pooled.ci_low, pooled.ci_high) == pytest.approx(
        (np.tanh(np.arctanh(rho) - half), np.tanh(np.arctanh(rho) + half))
    )
    for name in ANNOTATORS:
        mine = [k for k in keys if name in by_key[k]]
        expected = stats.spearmanr([by_key[k][name] for k in mine], [gold[k] for k in mine]).statistic
        assert rows[name].score == pytest.approx(expected)
    pairwise = []
    for i, a in enumerate(ANNOTATORS):
        for b in ANNOTATORS[i + 1 :]:
            both = [k for k in keys if a in by_key[k] and b in by_key[k]]
            pairwise.append(stats.spearmanr([by_key[k][a] for k in both], [by_key[k][b] for k in both]).statistic)
    agreement = {a.measure: a for a in report.agreement}
    assert agreement["mean_pairwise_spearman"].value == pytest.approx(np.mean(pairwise))
    assert agreement["mean_pairwise_spearman"].n_pairs == 3

    # Classification: majority label vs gold with a Wilson interval; Fleiss' kappa of the labels.
    report = baseline_report_build(study=cls_study, models=[])
    rows = {row.name: row for row in report.rows}
    by_key, gold = answers_of(cls_study)
    keys = sorted(gold)

    def majority(values):
        counts = {v: list(values).count(v) for v in values}
        return min(v for v in counts if counts[v] == max(counts.values()))  # ties: the label sorting first

    correct = sum(majority(by_key[k].values()) == gold[k] for k in keys)
    pooled = rows["humans (pooled)"]
    assert pooled.score == pytest.approx(correct / len(keys)) and pooled.ci_method == "wilson"
    assert (pooled.ci_low, pooled.ci_high) == pytest.approx(proportion_confint(correct, len(keys), method="wilson"))
    table, _ = aggregate_raters(np.array([[by_key[k][name] for name in ANNOTATORS] for k in keys], dtype=str))
    assert {a.measure: a.value for a in report.agreement}["fleiss_kappa"] == pytest.approx(fleiss_kappa(table))
    assert all(0.8 <= rows[name].score <= 0.9 for name in ANNOTATORS), [rows[n].score for n in ANNOTATORS]
    return {"sts": rho, "classification": correct / len(keys)}


def test_llm_annotator_on_sts(llm_backend, shared_data, tmp_path, django_user_model):
    sts = import_stsb(shared_data, tmp_path)
    study = baseline_create(
        request=BaselineCreateRequest(name="hb-llm", dataset=sts, task_type="sts", n_instances=6, seed=5)
    )
    started = time.monotonic()
    progress = []
    result = baseline_llm_annotate(
        study=study, backend_alias="default", on_progress=lambda done, total: progress.append((done, total))
    )
    elapsed = time.monotonic() - started
    answers = list(BaselineAnswer.objects.filter(instance__study=study))
    assert result.rater == "llm:default" and result.total == 6 and result.skipped == 0 and result.failed == 0
    assert len(answers) == 6 == result.valid + result.invalid
    assert sum(not a.valid for a in answers) == result.invalid
    for answer in answers:
        assert answer.source == "llm" and answer.rater == "llm:default" and answer.user is None and answer.raw
        if answer.valid:
            assert isinstance(answer.value, float) and 0 <= answer.value <= 5
        else:
            assert answer.value is None
    assert progress[0] == (0, 6) and progress[-1] == (6, 6)

    # Running again sends nothing: every instance is answered by this rater already.
    again = baseline_llm_annotate(study=study, backend_alias="default")
    assert (again.skipped, again.valid, again.invalid) == (6, 0, 0)
    assert BaselineAnswer.objects.filter(instance__study=study).count() == 6
    out = tmp_path / "status.txt"
    with out.open("w") as handle:
        call_command("baseline", "status", "hb-llm", stdout=handle)
    assert "llm:default" in out.read_text() and "6 answers" in out.read_text()
    print(
        f"\nLLM annotator: 6 STS instances in {elapsed:.1f} s, {result.invalid} did not parse; "
        f"raw replies {[a.raw for a in answers]}"
    )


def test_clustering_and_reranking_publish_and_sync(argilla_server, settings, django_user_model, tmp_path):
    """The two task types the main test leaves out: their Argilla questions (free-text group name
    with the batch as context; a relevant/not-relevant label) and how answers come back."""
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    team = Project.objects.create(slug="hb-two")
    user = make_user(django_user_model, "hb-ann-solo", Role.ANNOTATOR, roster=team)
    topics = {
        "weather": ["It rained all day", "Snow is expected tonight", "A warm sunny afternoon"],
        "food": ["The soup was too salty", "Fresh bread from the bakery", "We grilled vegetables"],
    }
    path = tmp_path / "clusters.jsonl"
    path.write_text("".join(json.dumps({"text": t, "label": label}) + "\n" for label, ts in topics.items() for t in ts))
    clusters = dataset_import(source=path, task="clustering", name="hb-clusters", project=team)
    path = tmp_path / "rerank.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "query": f"news about {label}",
                    "positive": ts,
                    "negative": [t for o, other in topics.items() if o != label for t in other],
                }
            )
            + "\n"
            for label, ts in topics.items()
        )
    )
    rerank = dataset_import(source=path, task="reranking", name="hb-rerank", project=team)
    clu = baseline_create(
        request=BaselineCreateRequest(
            name="hb-clu",
            dataset=clusters,
            task_type="clustering",
            n_instances=6,
            project=team.slug,
            options={"batch_size": 6, "raters_per_instance": 1},
        )
    )
    rr = baseline_create(
        request=BaselineCreateRequest(
            name="hb-rr",
            dataset=rerank,
            task_type="reranking",
            n_instances=2,
            project=team.slug,
            options={"candidates": 4, "raters_per_instance": 1},
        )
    )
    owner = argilla.client_get()
    for study in (clu, rr):
        baseline_publish(study=study, annotators=[user])
        study.refresh_from_db()
    client = annotator_client(owner, "hb-ann-solo")
    clu_dataset, rr_dataset = own_dataset(clu, "hb-ann-solo"), own_dataset(rr, "hb-ann-solo")
    questions = owner.get(f"/api/v1/datasets/{clu_dataset}/questions").json()["items"]
    assert [(q["name"], q["settings"]["type"]) for q in questions] == [("group", "text")]
    questions = owner.get(f"/api/v1/datasets/{rr_dataset}/questions").json()["items"]
    assert [(q["name"], q["settings"]["type"]) for q in questions] == [("relevant", "label_selection")]

    gold = {i.key: i.gold for i in clu.instances.all()}
    records = pending(client, clu_dataset)
    assert_nothing_hidden_leaks(
        client,
        clu_dataset,
        [{**r, "fields": {"text": r["fields"]["text"]}} for r in records],
        clu,
        ("text",),
    )
    batch = "\n".join(f"{k}. {i.texts[0]}" for k, i in enumerate(clu.instances.all(), 1))
    for record in records:
        assert from_argilla(record["fields"]["batch"], Shown.HTML) == batch
        respond(client, record["id"], "submitted", {"group": f"  {gold[record['external_id']].upper()} "})
    gold = {i.key: i.gold for i in rr.instances.all()}
    records = pending(client, rr_dataset)
    assert_nothing_hidden_leaks(client, rr_dataset, records, rr, ("query", "candidate"))
    for record in records:
        respond(client, record["id"], "submitted", {"relevant": str(gold[record["external_id"]])})

    assert baseline_sync(study=clu).created == 6 and baseline_sync(study=rr).created == 8
    for study in (clu, rr):
        for answer in BaselineAnswer.objects.filter(instance__study=study).select_related("instance"):
            assert answer.value == answer.instance.gold and answer.rater == "hb-ann-solo"
        assert baseline_sync(study=study).changed == 0
    owner.close()
    client.close()
