"""Every route × every kind of caller, generated from the URL conf (pages, the API router, admin).

Each route must have a rule in ``RULES`` (keyed by URL name; the admin site's routes share one
rule, and are sampled: the index and each model's list and change pages): a route added without
one fails ``test_every_route_has_a_rule``, so nobody can ship an endpoint whose access nobody
decided. For each route and each caller that the rule keeps out,
GET and POST (with no body) must be refused without touching anything: a redirect to a login page
(pages), 401/403 (API), or 403; and no caller ever gets a 5xx. Callers: anonymous, an annotator,
a researcher, an admin (staff).

The project dimension (``test_no_route_lets_another_project_in``): one project, "alpha", holds an
object of every owned kind (dataset, import, prompt version, runs, judge report, study with an
annotator, a rating, a flag and a gate result, config, benchmark run, baseline study). Every route
is called with every id and name alpha holds, by a researcher of another project (never a 2xx on an
object route, no alpha name in any answer, nothing changed) and by a viewer of alpha (nothing
changed by any POST).
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from core.roles import Role
from tests.support import make_user

pytestmark = pytest.mark.django_db

PUBLIC, USER, RESEARCHER, STAFF = "public", "signed-in user", "researcher", "staff"
ANNOTATOR = "annotator only"  # their own Argilla account: researchers and admins have none to set
RANK = {"anonymous": 0, "annotator": 1, "researcher": 2, "admin": 3}
NEEDS = {PUBLIC: 0, USER: 1, RESEARCHER: 2, STAFF: 3, ANNOTATOR: 1}

# Who may use each route. Researcher means the 'researcher' group or an admin.
RULES: dict[str, str] = {
    "home": USER,
    "health": PUBLIC,  # liveness for everyone; details only for staff (tests/test_hardening_web.py)
    "audit-log": RESEARCHER,
    "projects": RESEARCHER,  # each researcher sees their own projects (tested per project below)
    "project": RESEARCHER,
    "login": PUBLIC,
    "invitation-accept": PUBLIC,  # the secret in the path is the key; an unknown one is a 404 (test_invitations)
    "logout": PUBLIC,
    "password_change": USER,
    "password_change_done": USER,
    "password_reset": PUBLIC,
    "password_reset_done": PUBLIC,
    "password_reset_confirm": PUBLIC,
    "password_reset_complete": PUBLIC,
    # Argilla calls it: no session, every delivery signed (annotation/studies/webhooks.py).
    "annotation:argilla-webhook": PUBLIC,
    # The API's description is public (the code is open source): it lists routes, never data.
    "schema": PUBLIC,
    "api-docs": PUBLIC,
    "api-redoc": PUBLIC,
    "api-root": PUBLIC,
    "admin:login": PUBLIC,
    "admin:logout": PUBLIC,
    "api-token": PUBLIC,  # exchanges a password for a token (throttled, lockout)
    "annotation:my-argilla": ANNOTATOR,
    "my-argilla-password": ANNOTATOR,
}
# Namespaces whose every route is for researchers (pages) and the API router (researchers only,
# core.permissions.IsResearcher), unless RULES says otherwise.
RESEARCHER_NAMESPACES = ("corpora", "transforms", "annotation", "evaluation")
STAFF_NAMESPACES = ("admin",)

# Values for the URL parameters, tried in order until the route accepts them (objects need not
# exist: a refusal must come before any lookup).
SAMPLE = {
    "pk": ["1"],
    "name": ["demo-sts", "1"],
    "fmt": ["csv", "json"],
    "uidb64": ["MQ"],
    "token": ["set-password"],
    "object_id": ["1"],
    "content_type_id": ["1"],
    "id": ["1"],
    "app_label": ["corpora"],
    "slug": ["shiftlab"],
}


def _url(name: str, params: list[str]) -> str:
    import itertools

    for values in itertools.product(*(SAMPLE[k] for k in params)):
        try:
            return reverse(name, kwargs=dict(zip(params, values, strict=True)))
        except NoReverseMatch:
            continue
    raise AssertionError(f"no sample value of {params} fits route {name}: extend SAMPLE")


def _routes() -> list[tuple[str, str]]:
    """(rule key, URL) of every route: one URL per name (format-suffix duplicates dropped)."""
    found: dict[str, str] = {}

    def walk(patterns, namespace: str | None) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, p.namespace or namespace)
                continue
            assert isinstance(p, URLPattern)
            if p.name is None:
                continue  # unnamed: the admin's "view on site"-style redirects, covered by the admin rule
            name = f"{namespace}:{p.name}" if namespace else p.name
            regex = p.pattern.regex
            params = list(regex.groupindex)
            if "format" in params or name in found:
                continue
            if namespace in STAFF_NAMESPACES and not _admin_sample(p.name):
                continue  # one guard (AdminSite.admin_view) wraps every admin route: sample it per model
            missing = [k for k in params if k not in SAMPLE]
            assert not missing, f"route {name} has parameters {missing}: add sample values to SAMPLE"
            url = _url(name, params)
            found[name] = url

    walk(get_resolver().url_patterns, None)
    return sorted(found.items())


def _admin_sample(name: str) -> bool:
    """The admin routes exercised: the index, login/logout, and each model's list and change pages."""
    return name in ("index", "login", "logout") or name.endswith(("_changelist", "_change"))


def rule_of(name: str) -> str | None:
    if name in RULES:
        return RULES[name]
    namespace = name.split(":", 1)[0] if ":" in name else None
    if namespace in STAFF_NAMESPACES:
        return STAFF
    if namespace in RESEARCHER_NAMESPACES:
        return RESEARCHER
    if namespace is None and _is_api(name):
        return RESEARCHER
    return None


def _is_api(name: str) -> bool:
    return reverse_safe(name).startswith("/api/")


def reverse_safe(name: str) -> str:
    return dict(ROUTES).get(name, "")


ROUTES = _routes()


def test_every_route_has_a_rule():
    missing = [name for name, _ in ROUTES if rule_of(name) is None]
    assert not missing, f"routes without an access rule (add them to RULES in {__file__}): {missing}"
    stale = [name for name in RULES if name not in dict(ROUTES)]
    assert not stale, f"rules for routes that no longer exist: {stale}"


ROLES = {"annotator": Role.ANNOTATOR, "researcher": Role.RESEARCHER, "admin": Role.ADMIN}


def _client(user) -> Client:
    client = Client(raise_request_exception=False)
    if user is not None:
        client.force_login(user)
    return client


def _refused(response) -> bool:
    if response.status_code in (401, 403):
        return True
    if response.status_code == 302:
        target = response.headers.get("Location", "")
        return "/login/" in target  # a page sends strangers to a login page (the site's or the admin's)
    return False


@pytest.mark.parametrize("who", ["anonymous", *ROLES])
def test_every_route_refuses_the_callers_its_rule_keeps_out_and_never_fails(who, django_user_model):
    """One caller against every route, GET and POST with no body (one test per caller, so the
    users and the dataset are made once, not once per route)."""
    from corpora.services import dataset_import

    dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    user = None if who == "anonymous" else make_user(django_user_model, f"matrix-{who}", ROLES[who])
    client = _client(user)
    problems = []
    for name, url in ROUTES:
        rule = rule_of(name)
        for method in ("get", "post"):
            response = getattr(client, method)(url)
            if response.status_code >= 500:
                problems.append(f"{method.upper()} {url} ({name}): {response.status_code}")
            elif (RANK[who] < NEEDS[rule] or (rule == ANNOTATOR and who != "annotator")) and not _refused(response):
                problems.append(f"{method.upper()} {url} ({name}, for {rule}) let {who} in: {response.status_code}")
            if method == "post" and user is not None and not client.session.get("_auth_user_id"):
                client = _client(user)  # a POST to a logout route signed the caller out: sign in again
    assert not problems, "\n".join(problems)


# --- the project dimension ----------------------------------------------------------------------

MARK = "alphasecret"  # in the name of everything alpha holds: no answer to an outsider may contain it


def _alpha_world(researcher, annotator):
    """One object of every owned kind, all in project "alpha" (built through the same builders as the
    other tests, then moved), and the ids and names that reach them."""
    from annotation.models import (
        Annotator,
        BaselineStudy,
        BenchmarkConfig,
        Flag,
        GateResult,
        Rating,
        Study,
        StudyItem,
    )
    from core.models import AuditEvent, Project
    from corpora.models import Dataset, DatasetImport
    from evaluation.models import BenchmarkRun
    from tests.support import benchmark_run_with_results, published_keyword_study
    from transforms.models import JudgeReport, PromptTemplate, TransformRun

    study = published_keyword_study(researcher=researcher, name=f"{MARK}-study", limit=6, items=4, batch_size=2)
    rater = Annotator.objects.create(study=study, user=annotator)
    item = StudyItem.objects.filter(study=study).first()
    rating = Rating.objects.create(
        study_item=item, annotator=rater, question="quality", value=2, submitted_at=timezone.now()
    )
    Flag.objects.create(rating=rating, rule=Flag.Rule.choices[0][0], value=2)
    GateResult.objects.create(
        study=study, transformation="random_keywords", passed=True, evidence={}, evidence_hash="0" * 64
    )
    benchmark = benchmark_run_with_results()
    BenchmarkRun.objects.filter(pk=benchmark.pk).update(name=f"{MARK}-benchmark")
    dataset = Dataset.objects.get(name="demo-sts")
    DatasetImport.objects.create(name=f"{MARK}-import", task_type="sts", upload_dir="/nonexistent")
    PromptTemplate.objects.create(key="paraphrase", version=99, system=MARK, user=MARK, content_hash=MARK)
    JudgeReport.objects.create(kind=JudgeReport.Kind.choices[0][0], dataset=dataset, judges=["embedded"])
    BenchmarkConfig.objects.create(name=f"{MARK}-config", document={}, config_hash=MARK, json_text="{}", yaml_text="{}")
    BaselineStudy.objects.create(
        name=f"{MARK}-baseline", dataset=dataset, task_type="sts", n_instances=4, instructions=MARK
    )
    for d in Dataset.objects.all():
        Dataset.objects.filter(pk=d.pk).update(name=f"{MARK}-{d.name}")
    alpha = Project.objects.get(slug="alpha")
    owned = (
        Dataset, DatasetImport, PromptTemplate, TransformRun, JudgeReport, Study, BaselineStudy,
        BenchmarkConfig, BenchmarkRun,
    )  # fmt: skip
    ids, names = set(), {"alpha"}
    for model in owned:
        model.objects.update(project=alpha)
        ids |= {str(pk) for pk in model.objects.values_list("pk", flat=True)}
        names |= {str(n) for n in model.objects.values_list("name", flat=True) if n} if _has(model, "name") else set()
    AuditEvent.objects.update(project=alpha)  # what was done to alpha's objects is alpha's history
    for model in (Annotator, Rating, Flag, GateResult, StudyItem):
        ids |= {str(pk) for pk in model.objects.values_list("pk", flat=True)}
    return sorted(ids, key=int), sorted(names)


def _has(model, field: str) -> bool:
    return any(f.name == field for f in model._meta.get_fields())


def _fingerprint() -> dict[str, str]:
    """Every row of every Shiftlab model, by model: a request that changes anything changes this."""
    import hashlib

    from django.apps import apps

    def rows(model):
        owned = _has(model, "project") and model._meta.label != "core.Membership"
        rows = model.objects.filter(project__slug="alpha") if owned else model.objects.all()  # not the caller's own
        return repr(list(rows.order_by("pk").values())).encode()

    return {
        model._meta.label: hashlib.sha256(rows(model)).hexdigest()
        for model in apps.get_models()
        if model._meta.app_label in ("core", "corpora", "transforms", "annotation", "evaluation")
    }


def _changed(before: dict[str, str]) -> list[str]:
    from core.models import AuditEvent

    after = _fingerprint()
    changed = sorted(label for label in before if after[label] != before[label])
    if "core.AuditEvent" in changed:
        changed.append([str(e) for e in AuditEvent.objects.filter(project__slug="alpha")[:5]])
    return changed


def _object_urls(ids: list[str], names: list[str]) -> list[tuple[str, str]]:
    """(route, URL) for every route that takes an object, with each of alpha's ids and names."""
    import itertools

    values = {**SAMPLE, "pk": ids, "id": ids, "object_id": ids, "name": names, "slug": names}
    urls = []
    for name, _ in ROUTES:
        if name.startswith("admin:") or RULES.get(name) == PUBLIC:
            continue
        params = [k for k in _route_params(name)]
        if not params:
            continue
        seen = set()
        for combo in itertools.product(*(values[k] for k in params)):
            try:
                url = reverse(name, kwargs=dict(zip(params, combo, strict=True)))
            except NoReverseMatch:
                continue
            if url not in seen:
                seen.add(url)
                urls.append((name, url))
    return urls


def _route_params(name: str) -> list[str]:
    found = []

    def walk(patterns, namespace):
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, p.namespace or namespace)
            elif p.name and (f"{namespace}:{p.name}" if namespace else p.name) == name and not found:
                found.extend(k for k in p.pattern.regex.groupindex if k != "format")

    walk(get_resolver().url_patterns, None)
    return found


def test_no_route_lets_another_project_in(django_user_model):
    """A researcher of project beta gets no 2xx from any route naming alpha's objects, finds no
    alpha name in any answer, and changes nothing; a viewer of alpha changes nothing by POST."""
    from core.projects import membership_set, project_create

    owner = make_user(django_user_model, "alpha-owner", Role.RESEARCHER)
    rater = make_user(django_user_model, "alpha-rater", Role.ANNOTATOR)
    outsider = make_user(django_user_model, "beta-researcher", Role.RESEARCHER)
    viewer = make_user(django_user_model, "alpha-viewer", Role.RESEARCHER)
    alpha = project_create(slug="alpha", owner=owner, actor=None)
    beta = project_create(slug="beta", owner=None, actor=None)
    membership_set(project=beta, user=outsider, role="member", actor=None)
    membership_set(project=alpha, user=viewer, role="viewer", actor=None)
    ids, names = _alpha_world(owner, rater)
    object_urls = _object_urls(ids, names)
    assert len(object_urls) > 100, "the world reaches too few routes: check _alpha_world"

    before = _fingerprint()
    problems = []
    client = _client(outsider)
    for name, url in object_urls:
        for method in ("get", "post"):
            response = getattr(client, method)(url)
            if response.status_code >= 500 or 200 <= response.status_code < 300:
                problems.append(f"outsider {method.upper()} {url} ({name}): {response.status_code}")
    for name, url in ROUTES:
        if name.startswith("admin:") or _route_params(name):
            continue
        response = client.get(url)
        if MARK in response.content.decode(errors="replace"):
            problems.append(f"outsider GET {url} ({name}) shows alpha's objects")
    if changed := _changed(before):
        problems.append(f"the outsider's requests changed {changed}")

    client = _client(viewer)
    for name, url in object_urls:
        response = client.post(url)
        if response.status_code >= 500:
            problems.append(f"viewer POST {url} ({name}): {response.status_code}")
    if changed := _changed(before):
        problems.append(f"a viewer's POSTs changed {changed}")
    readable = client.get(reverse("corpora:detail", kwargs={"name": f"{MARK}-demo-sts"}))
    assert readable.status_code == 200, "a viewer reads the project's datasets"
    assert not problems, "\n".join(problems)
