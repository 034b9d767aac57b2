"""Audit rows hold only what the reading project may see (issue 39, finding 8).

An annotator may be on the rosters of alpha and beta. What beta does with her (withdraws her from
a study of beta, with a free-text reason) is beta's business: the row goes into beta's log only,
and a researcher of alpha never sees it, nor its reason, on any audit listing (the audit log page
and the home page's recent decisions; the API has no audit listing). Rows that older versions
copied into every sharing project are hidden from alpha too. Beta's researchers and admins see it.
A change to the person herself (her Argilla password) is still audited in every project sharing her."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Study
from core.models import AuditEvent
from core.projects import project_create
from core.roles import Role
from core.rosters import annotator_audit, roster_add, roster_remove
from core.selectors import audit_event_list
from core.vocabulary import plain_verb
from tests.support import make_user, page_as

pytestmark = pytest.mark.django_db
REASON = "moves to the confidential merger annotation"


WITHDRAW = "annotator.withdraw"


@pytest.fixture
def scene(django_user_model) -> dict:
    ralph = make_user(django_user_model, "au-ralph", Role.RESEARCHER)
    bea = make_user(django_user_model, "au-bea", Role.RESEARCHER)
    boss = make_user(django_user_model, "au-boss", Role.ADMIN)
    alpha = project_create(slug="au-alpha", owner=ralph, actor=None)
    beta = project_create(slug="au-beta", owner=bea, actor=None)
    alma = make_user(django_user_model, "au-alma", Role.ANNOTATOR, roster=alpha)
    roster_add(project=beta, user=alma, actor=None)  # an admin shares her with beta
    study_b = Study.objects.create(
        name="au-secret-study", project=beta, workspace="au-beta", design={}, design_hash="d" * 64, status="locked"
    )
    return {"ralph": ralph, "bea": bea, "boss": boss, "alpha": alpha, "beta": beta, "alma": alma, "study_b": study_b}


def _withdraw_in_beta(scene: dict) -> None:
    """What ``annotator_replace`` audits when beta withdraws her from its study (its last step)."""
    study = scene["study_b"]
    annotator_audit(
        actor=scene["bea"],
        verb="annotator.withdraw",
        user=scene["alma"],
        obj=study,
        payload={"study": str(study), "reason": REASON, "by": "au-bo"},
    )


def _listed(user) -> list[str]:
    """Every audit listing ``user`` reads: the selector, the audit log page and the home page."""
    rows = [f"{e.verb} {e.object_repr} {e.payload}" for e in audit_event_list(user=user)]
    return [*rows, page_as(user).get(reverse("audit-log")).content.decode(), page_as(user).get("/").content.decode()]


def test_beta_withdrawing_a_shared_annotator_is_not_in_alphas_audit_log(scene):
    _withdraw_in_beta(scene)
    for shown in _listed(scene["ralph"]):
        assert WITHDRAW not in shown and plain_verb(WITHDRAW) not in shown, shown  # as code or in words
        assert REASON not in shown and "au-secret-study" not in shown, shown
    for reader in (scene["bea"], scene["boss"]):
        seen = [e for e in audit_event_list(user=reader) if e.verb == "annotator.withdraw"]
        assert [e.payload["reason"] for e in seen] == [REASON], reader
        assert plain_verb(WITHDRAW) in page_as(reader).get(reverse("audit-log")).content.decode()
    # One row, in beta.
    assert list(AuditEvent.objects.filter(verb="annotator.withdraw").values_list("project__slug", flat=True)) == [
        "au-beta"
    ]


def test_rows_copied_into_alpha_by_older_versions_are_hidden_from_alpha(scene):
    study = scene["study_b"]
    AuditEvent.objects.create(
        project=scene["alpha"],
        actor=scene["bea"],
        verb="annotator.withdraw",
        object_type="annotation.study",
        object_id=str(study.pk),
        object_repr=str(study),
        payload={"annotator": "au-alma", "in_project": "au-beta", "reason": REASON},
    )
    for shown in _listed(scene["ralph"]):
        assert REASON not in shown and "au-secret-study" not in shown, shown
    assert any(e.payload.get("reason") == REASON for e in audit_event_list(user=scene["boss"]))


def test_beta_taking_her_off_its_roster_stays_in_beta(scene):
    roster_remove(project=scene["beta"], user=scene["alma"], actor=scene["bea"])
    assert not any(e.verb == "annotator.roster.remove" for e in audit_event_list(user=scene["ralph"]))
    assert any(e.verb == "annotator.roster.remove" for e in audit_event_list(user=scene["bea"]))


def test_a_change_to_the_person_is_audited_in_every_project_sharing_her(scene):
    annotator_audit(actor=scene["alma"], verb="annotator.argilla_password.set", user=scene["alma"])
    for reader in ("ralph", "bea"):
        assert any(e.verb == "annotator.argilla_password.set" for e in audit_event_list(user=scene[reader])), reader
