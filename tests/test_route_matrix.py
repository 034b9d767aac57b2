"""Every route × every kind of caller, generated from the URL conf (pages, the API router, admin).

Each route must have a rule in ``RULES`` (keyed by URL name; the admin site's routes share one
rule, and are sampled: the index and each model's list and change pages): a route added without
one fails ``test_every_route_has_a_rule``, so nobody can ship an endpoint whose access nobody
decided. For each route and each caller that the rule keeps out,
GET and POST (with no body) must be refused without touching anything: a redirect to a login page
(pages), 401/403 (API), or 403; and no caller ever gets a 5xx. Callers: anonymous, an annotator,
a researcher, an admin (staff).

Not covered yet: callers from *different projects* (project A / project B / a viewer). Shiftlab
has no projects yet (issue 16); when it does, they join ``ROLES``.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse

from core.roles import Role
from tests.support import make_user

pytestmark = pytest.mark.django_db

PUBLIC, USER, RESEARCHER, STAFF = "public", "signed-in user", "researcher", "staff"
RANK = {"anonymous": 0, "annotator": 1, "researcher": 2, "admin": 3}
NEEDS = {PUBLIC: 0, USER: 1, RESEARCHER: 2, STAFF: 3}

# Who may use each route. Researcher means the 'researcher' group or an admin.
RULES: dict[str, str] = {
    "home": USER,
    "health": PUBLIC,  # liveness for everyone; details only for staff (tests/test_hardening_web.py)
    "audit-log": RESEARCHER,
    "login": PUBLIC,
    "logout": PUBLIC,
    "password_change": USER,
    "password_change_done": USER,
    "password_reset": PUBLIC,
    "password_reset_done": PUBLIC,
    "password_reset_confirm": PUBLIC,
    "password_reset_complete": PUBLIC,
    # Argilla calls it: no session, every delivery signed (annotation/webhooks.py).
    "annotation:argilla-webhook": PUBLIC,
    # The API's description is public (the code is open source): it lists routes, never data.
    "schema": PUBLIC,
    "api-docs": PUBLIC,
    "api-redoc": PUBLIC,
    "api-root": PUBLIC,
    "admin:login": PUBLIC,
    "admin:logout": PUBLIC,
    "api-token": PUBLIC,  # exchanges a password for a token (throttled, lockout)
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
            elif RANK[who] < NEEDS[rule] and not _refused(response):
                problems.append(f"{method.upper()} {url} ({name}, for {rule}) let {who} in: {response.status_code}")
            if method == "post" and user is not None and not client.session.get("_auth_user_id"):
                client = _client(user)  # a POST to a logout route signed the caller out: sign in again
    assert not problems, "\n".join(problems)
