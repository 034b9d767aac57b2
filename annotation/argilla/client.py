"""Calls to an Argilla 2.8 server's REST API (``/api/v1``): the only module that talks to Argilla.

Why not the ``argilla`` SDK: a study needs a dozen endpoints, some of them as an annotator (the SDK
refuses annotators ``dataset.records()``), and importing the SDK loads Hugging Face ``datasets``
and pyarrow into every web process. The endpoints are called with httpx instead.

Studies keep Argilla ids (dataset, users) in Django and pass them back here. Every function takes
the connection from ``client_get`` as ``client=`` (close it when done, e.g. with
``contextlib.closing``) and raises ``ArgillaError``, whose message names the server and what to do.

Every text the web app shows (fields, titles, labels, descriptions, guidelines, names) goes out
through ``display.for_argilla``, written for the way the app puts it on the page: annotators see
the characters of a text, and nothing in one runs as code.

Deactivating an annotator removes them from the workspace rather than deleting the user: Argilla
2.8 has no "inactive" flag, and deleting a user deletes their responses (cascade) in every study
and project they rate. Without the workspace the user can no longer open its datasets, nor answer
its records; but Argilla 2.8 lets a user edit or delete a response of their own by its id
(``PUT``/``DELETE /api/v1/responses/{id}``) whatever their workspaces, so cutting someone off a
dataset for good means deleting their responses (``dataset_delete`` for their own dataset,
``responses_delete`` in one shared with others), once Shiftlab holds their answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

import httpx
from django.conf import settings

from annotation.argilla import ArgillaError, ArgillaUnavailable
from annotation.argilla.display import Shown, for_argilla
from annotation.argilla.records import (
    LabelQuestion,
    MetadataProperty,
    Question,
    RatingQuestion,
    RecordIn,
    ResponseRow,
    TextField,
    TextQuestion,
    Webhook,
)

Role = Literal["annotator", "admin", "owner"]

API_KEY_HEADER = "X-Argilla-Api-Key"
TIMEOUT_SECONDS = 60.0
# Server limits: records per bulk upsert, records per page of a listing.
_RECORDS_BULK = 500
_RECORDS_PAGE = 1000
GUIDELINES_MAX = 10_000  # the server's limit, in characters as sent


def _call(client: httpx.Client, method: str, path: str, action: str, *, accept: Sequence[int] = (), **kwargs) -> Any:
    """One request; the decoded JSON answer, or None for a status listed in ``accept`` or no body.

    Transport failures and error statuses become an ``ArgillaError`` saying what failed and what to do.
    """
    url = str(client.base_url).rstrip("/")
    try:
        response = client.request(method, path, **kwargs)
    except httpx.TransportError as exc:
        raise ArgillaUnavailable(
            f"Argilla is not reachable at {url} ({exc.__class__.__name__}: {exc}) while trying to {action}. "
            "Start the local server with `python manage.py argilla_server`, or set ARGILLA_API_URL."
        ) from exc
    if response.status_code in accept:
        return None
    if response.status_code in (401, 403):
        raise ArgillaError(
            f"Argilla at {url} refused to {action} (HTTP {response.status_code}): "
            "check ARGILLA_API_KEY (the API key of an Argilla owner)."
        )
    if response.is_error:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text[:500]
        raise ArgillaError(f"Argilla at {url} could not {action} (HTTP {response.status_code}): {detail}")
    return response.json() if response.content else None


@contextmanager
def argilla_connection(client: httpx.Client | None) -> Iterator[httpx.Client]:
    """The given Argilla connection, or a new owner connection closed afterwards."""
    if client is not None:
        yield client
        return
    with closing(client_get()) as owned:
        yield owned


def client_get(*, api_url: str | None = None, api_key: str | None = None) -> httpx.Client:
    """A connection to ``ARGILLA_API_URL`` as the owner whose key is ``ARGILLA_API_KEY``, unless given.

    Checks the key at once: studies create workspaces, users and datasets, which needs an owner.
    """
    url = api_url or settings.ARGILLA_API_URL
    key = api_key or settings.ARGILLA_API_KEY
    if not url or not key:
        raise ArgillaError("Set ARGILLA_API_URL and ARGILLA_API_KEY (the API key of an Argilla owner).")
    # trust_env=False: requests to Argilla never go through a proxy configured for the internet.
    client = httpx.Client(base_url=url, headers={API_KEY_HEADER: key}, timeout=TIMEOUT_SECONDS, trust_env=False)
    try:
        me = _call(client, "GET", "/api/v1/me", "authenticate")
    except ArgillaError:
        client.close()
        raise
    if me["role"] != "owner":
        client.close()
        raise ArgillaError(
            f"ARGILLA_API_KEY belongs to {me['username']!r}, whose role at {url} is {me['role']!r}: "
            "Shiftlab needs the API key of an owner."
        )
    return client


def _workspace_id(client: httpx.Client, name: str) -> UUID | None:
    listing = _call(client, "GET", "/api/v1/me/workspaces", "list workspaces")  # an owner sees them all
    return next((UUID(w["id"]) for w in listing["items"] if w["name"] == name), None)


def _user(client: httpx.Client, username: str) -> dict[str, Any] | None:
    listing = _call(client, "GET", "/api/v1/users", "list users")
    return next((u for u in listing["items"] if u["username"] == username), None)


def _user_id(client: httpx.Client, username: str) -> UUID | None:
    user = _user(client, username)
    return UUID(user["id"]) if user is not None else None


def workspace_ensure(name: str, *, client: httpx.Client) -> UUID:
    """The id of workspace ``name``, created if missing."""
    existing = _workspace_id(client, name)
    if existing is not None:
        return existing
    created = _call(client, "POST", "/api/v1/workspaces", f"create workspace {name!r}", json={"name": name})
    return UUID(created["id"])


def user_ensure(username: str, password: str, role: Role, workspace: str, *, client: httpx.Client) -> UUID:
    """The Argilla id of ``username``, created with ``password`` and ``role`` if missing, and a
    member of ``workspace``. An existing user keeps their password, and must already have ``role``:
    an account is never handed over with another role than the one asked for."""
    workspace_id = _workspace_id(client, workspace)
    if workspace_id is None:
        raise ArgillaError(f"Argilla at {client.base_url} has no workspace {workspace!r}: ensure it first.")
    existing = _user(client, username)
    if existing is None:
        body = {"username": username, "first_name": username, "role": role, "password": password}
        user_id = UUID(_call(client, "POST", "/api/v1/users", f"create user {username!r}", json=body)["id"])
    else:
        user_role_check(username, existing["role"], role, client=client)
        user_id = UUID(existing["id"])
    membership = {"user_id": str(user_id)}
    action = f"add user {username!r} to workspace {workspace!r}"
    # 409: already a member.
    _call(client, "POST", f"/api/v1/workspaces/{workspace_id}/users", action, accept=(409,), json=membership)
    return user_id


# --- H8a (issue 20): annotator onboarding sets or resets an annotator's password -------------
def user_password_set(username: str, password: str, *, client: httpx.Client) -> UUID:
    """Give the existing annotator account ``username`` the password ``password``; refuses any
    other role (an owner's or admin's password is never changed from Shiftlab)."""
    existing = _user(client, username)
    if existing is None:
        raise ArgillaError(f"Argilla at {client.base_url} has no user {username!r}: publish the study with them first")
    user_role_check(username, existing["role"], "annotator", client=client)
    action = f"set the password of user {username!r}"
    _call(client, "PATCH", f"/api/v1/users/{existing['id']}", action, json={"password": password})
    return UUID(existing["id"])


def user_get_id(username: str, *, client: httpx.Client) -> UUID | None:
    """The Argilla id of ``username``, or None when no such user exists."""
    return _user_id(client, username)


def user_roles(*, client: httpx.Client) -> dict[str, str]:
    """Every Argilla user's role, by username."""
    listing = _call(client, "GET", "/api/v1/users", "list users")
    return {u["username"]: u["role"] for u in listing["items"]}


def user_role_check(username: str, found: str, wanted: Role, *, client: httpx.Client) -> None:
    """Refuse to use the existing Argilla account ``username`` (role ``found``) as a ``wanted`` one."""
    if found != wanted:
        raise ArgillaError(
            f"Argilla at {client.base_url} already has a user {username!r} with role {found!r}, not {wanted!r}: "
            f"Shiftlab will not use it as an {wanted} account. Rename the Django user, or rename or remove "
            "that Argilla account, then try again."
        )


def usernames(*, client: httpx.Client) -> dict[UUID, str]:
    """Every Argilla user's id and username (to tell who answered)."""
    listing = _call(client, "GET", "/api/v1/users", "list users")
    return {UUID(u["id"]): u["username"] for u in listing["items"]}


def user_deactivate(username: str, workspace: str, *, client: httpx.Client) -> bool:
    """Remove ``username`` from ``workspace`` (see the module docstring); False if they were not in it."""
    workspace_id, user_id = _workspace_id(client, workspace), _user_id(client, username)
    if workspace_id is None or user_id is None:
        return False
    action = f"remove user {username!r} from workspace {workspace!r}"
    removed = _call(client, "DELETE", f"/api/v1/workspaces/{workspace_id}/users/{user_id}", action, accept=(404,))
    return removed is not None


def dataset_create(
    *,
    client: httpx.Client,
    workspace: str,
    name: str,
    fields: Sequence[TextField],
    rating_questions: Sequence[RatingQuestion] = (),
    questions: Sequence[Question] = (),
    comment_question: str | None = None,
    guidelines: str,
    min_submitted: int,
    metadata: Sequence[MetadataProperty] = (),
) -> UUID:
    """Create and publish a dataset; return its id.

    ``min_submitted`` is the task distribution: a record leaves the annotators' queue once that
    many of them have submitted it. Questions are created in order: ``rating_questions``, then
    ``questions`` (of any kind), then, when ``comment_question`` is given, an optional free-text
    question named ``comment`` with that title. Records may carry only the declared metadata.
    """
    workspace_id = _workspace_id(client, workspace)
    if workspace_id is None:
        raise ArgillaError(f"Argilla at {client.base_url} has no workspace {workspace!r}: ensure it first.")
    action = f"create dataset {name!r} in workspace {workspace!r}"
    sent_guidelines = for_argilla(guidelines, Shown.MARKDOWN)
    if len(sent_guidelines) > GUIDELINES_MAX:
        raise ArgillaError(
            f"The guidelines of dataset {name!r} are {len(sent_guidelines)} characters as sent to Argilla "
            f"(each &, < and > counts 4 or 5); Argilla takes at most {GUIDELINES_MAX}: shorten them."
        )
    body = {
        "name": for_argilla(name, Shown.TEXT),
        "workspace_id": str(workspace_id),
        "guidelines": sent_guidelines,
        "allow_extra_metadata": False,
        "distribution": {"strategy": "overlap", "min_submitted": min_submitted},
    }
    dataset_id = UUID(_call(client, "POST", "/api/v1/datasets", action, json=body)["id"])
    base = f"/api/v1/datasets/{dataset_id}"
    for text in fields:
        title = for_argilla(text.title, Shown.TEXT)
        body = {
            "name": text.name,
            "title": title,
            "required": True,
            "settings": {"type": "text", "use_markdown": False},
        }
        _call(client, "POST", f"{base}/fields", action, json=body)
    extra = [TextQuestion("comment", comment_question, required=False)] if comment_question else []
    for question in [*rating_questions, *questions, *extra]:
        _call(client, "POST", f"{base}/questions", action, json=_question_body(question))
    for prop in metadata:
        body = {
            "name": prop.name,
            "title": for_argilla(prop.title or prop.name, Shown.TEXT),
            "settings": {"type": prop.kind},
            "visible_for_annotators": False,
        }
        _call(client, "POST", f"{base}/metadata-properties", action, json=body)
    _call(client, "PUT", f"{base}/publish", action)
    return dataset_id


def _question_body(question: Question) -> dict[str, Any]:
    """The REST body creating ``question`` (Argilla's question settings of type rating,
    label_selection or text)."""
    if isinstance(question, RatingQuestion):
        settings_ = {"type": "rating", "options": [{"value": value} for value in question.values]}
    elif isinstance(question, LabelQuestion):
        settings_ = {
            "type": "label_selection",
            "options": [{"value": value, "text": for_argilla(text, Shown.TEXT)} for value, text in question.labels],
        }
    else:
        settings_ = {"type": "text", "use_markdown": False}
    required = question.required if isinstance(question, TextQuestion) else True
    return {
        "name": question.name,
        "title": for_argilla(question.title, Shown.TEXT),
        "description": for_argilla(question.description, Shown.HTML) or None,
        "required": required,
        "settings": settings_,
    }


def dataset_find(workspace: str, name: str, *, client: httpx.Client) -> UUID | None:
    """The id of dataset ``name`` in ``workspace``, or None (lets a half-finished publish resume)."""
    workspace_id = _workspace_id(client, workspace)
    if workspace_id is None:
        return None
    listing = _call(
        client,
        "GET",
        "/api/v1/me/datasets",
        f"list the datasets of workspace {workspace!r}",
        params={"workspace_id": str(workspace_id)},
    )
    return next(
        (UUID(d["id"]) for d in listing["items"] if d["name"] == name and d["workspace_id"] == str(workspace_id)), None
    )


def dataset_delete(dataset_id: UUID, *, client: httpx.Client) -> bool:
    """Delete a dataset with its records and their responses; False if the server had no such
    dataset. The only way in Argilla 2.8 to stop a user editing their own responses (see the
    module docstring)."""
    deleted = _call(client, "DELETE", f"/api/v1/datasets/{dataset_id}", f"delete dataset {dataset_id}", accept=(404,))
    return deleted is not None


def _dataset_records(
    dataset_id: UUID, *, client: httpx.Client, action: str, responses: bool
) -> Iterator[tuple[dict[str, Any], int]]:
    """Every record of the dataset (with its responses if ``responses``), read a page of
    ``_RECORDS_PAGE`` at a time, each with the dataset's record total as the server reported it."""
    offset, total = 0, None
    while total is None or offset < total:
        params = {"offset": offset, "limit": _RECORDS_PAGE} | ({"include": "responses"} if responses else {})
        page = _call(client, "GET", f"/api/v1/datasets/{dataset_id}/records", action, params=params)
        total = page["total"]
        if not page["items"]:
            break
        for record in page["items"]:
            yield record, total
        offset += len(page["items"])


def responses_delete(dataset_id: UUID, user_id: UUID, *, client: httpx.Client) -> int:
    """Delete every response of the user ``user_id`` in the dataset (the owner may delete anyone's);
    returns how many. For a dataset shared with others, where ``dataset_delete`` would take theirs."""
    action = f"read the responses of dataset {dataset_id}"
    ids = [
        r["id"]
        for record, _ in _dataset_records(dataset_id, client=client, action=action, responses=True)
        for r in record.get("responses") or []
        if r["user_id"] == str(user_id)
    ]
    for response_id in ids:
        _call(client, "DELETE", f"/api/v1/responses/{response_id}", f"delete response {response_id}", accept=(404,))
    return len(ids)


def records_log(dataset_id: UUID, records: Iterable[RecordIn], *, client: httpx.Client) -> int:
    """Add records, or update those whose ``external_id`` exists already; return how many were sent.

    Field texts go out as ``display.for_argilla`` writes them for the web app (read them back with
    ``display.from_argilla``); metadata goes as it is (Shiftlab's own values, hidden from annotators).
    """
    items = [
        {
            "external_id": r.external_id,
            "fields": {name: for_argilla(text, Shown.HTML) for name, text in r.fields.items()},
            "metadata": dict(r.metadata),
        }
        for r in records
    ]
    for start in range(0, len(items), _RECORDS_BULK):
        batch = items[start : start + _RECORDS_BULK]
        action = f"log records {start + 1}-{start + len(batch)} of {len(items)} to dataset {dataset_id}"
        _call(client, "PUT", f"/api/v1/datasets/{dataset_id}/records/bulk", action, json={"items": batch})
    return len(items)


def responses_fetch(dataset_id: UUID, *, client: httpx.Client) -> Iterator[ResponseRow]:
    """Every response of every user in the dataset, drafts and discarded ones included.

    Raises ``ArgillaError`` if the dataset changed while it was read (read it again then).
    """
    action = f"read the responses of dataset {dataset_id}"
    seen: set[str] = set()
    total = 0
    for record, reported in _dataset_records(dataset_id, client=client, action=action, responses=True):
        seen.add(record["id"])
        total = reported
        yield from _response_rows(record)
    if len(seen) != total:
        raise ArgillaError(
            f"Argilla at {client.base_url}: dataset {dataset_id} changed while its responses were read "
            f"({len(seen)} of {total} records seen); read them again."
        )


def _aware(moment: datetime) -> datetime:
    """Argilla writes UTC timestamps without an offset; say so, so that Django stores them right."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _response_rows(record: Mapping[str, Any]) -> Iterator[ResponseRow]:
    for answer in record.get("responses") or []:
        common = {
            "record_external_id": record["external_id"],
            "user_id": UUID(answer["user_id"]),
            "status": answer["status"],
            "updated_at": _aware(datetime.fromisoformat(answer["updated_at"])),
        }
        values = answer.get("values") or {}
        if not values:
            yield ResponseRow(question=None, value=None, **common)
        for question, value in values.items():
            yield ResponseRow(question=question, value=value.get("value"), **common)


def record_ids(dataset_id: UUID, *, client: httpx.Client) -> dict[str, UUID]:
    """Argilla's record id of every record of the dataset, by Shiftlab's external id."""
    action = f"list the records of dataset {dataset_id}"
    records = _dataset_records(dataset_id, client=client, action=action, responses=False)
    return {r["external_id"]: UUID(r["id"]) for r, _ in records if r.get("external_id")}


_RECORDS_DELETE = 100  # the server's limit per request


def records_delete(dataset_id: UUID, ids: Sequence[UUID], *, client: httpx.Client) -> None:
    """Delete records (and their responses) by Argilla record id."""
    ids = list(ids)
    for start in range(0, len(ids), _RECORDS_DELETE):
        chunk = ids[start : start + _RECORDS_DELETE]
        action = f"delete {len(chunk)} records of dataset {dataset_id}"
        params = {"ids": ",".join(str(i) for i in chunk)}
        _call(client, "DELETE", f"/api/v1/datasets/{dataset_id}/records", action, params=params)


# Webhooks. Argilla's are server-wide: one sees the events of every dataset, and only owners may
# manage them. The server signs each delivery as Standard Webhooks says (``webhook-id``,
# ``webhook-timestamp``, ``webhook-signature`` headers) with the webhook's secret, which it
# generates and returns (base64, without the ``whsec_`` prefix).


def _webhook(raw: Mapping[str, Any]) -> Webhook:
    return Webhook(
        id=UUID(raw["id"]),
        url=raw["url"],
        events=tuple(raw["events"]),
        enabled=raw["enabled"],
        secret=raw["secret"],
        description=raw.get("description") or "",
    )


def webhooks_list(*, client: httpx.Client) -> list[Webhook]:
    """Every webhook of the server, oldest first."""
    listing = _call(client, "GET", "/api/v1/webhooks", "list webhooks")
    return [_webhook(w) for w in listing["items"]]


def webhook_create(url: str, events: Sequence[str], *, description: str = "", client: httpx.Client) -> Webhook:
    """Register a webhook sending ``events`` (e.g. ``response.created``) to ``url``; it comes back
    with the secret Argilla generated to sign its deliveries. The server keeps at most 10."""
    body: dict[str, Any] = {"url": url, "events": list(events)}
    if description:
        body["description"] = description
    return _webhook(_call(client, "POST", "/api/v1/webhooks", f"create a webhook to {url}", json=body))


def webhook_update(
    webhook_id: UUID,
    *,
    client: httpx.Client,
    url: str | None = None,
    events: Sequence[str] | None = None,
    enabled: bool | None = None,
) -> Webhook:
    """Change the given attributes of a webhook (its secret stays)."""
    body = {
        key: value
        for key, value in (("url", url), ("events", list(events) if events is not None else None), ("enabled", enabled))
        if value is not None
    }
    return _webhook(_call(client, "PATCH", f"/api/v1/webhooks/{webhook_id}", f"update webhook {webhook_id}", json=body))


def webhook_delete(webhook_id: UUID, *, client: httpx.Client) -> bool:
    """Delete a webhook; False if the server had no such webhook."""
    deleted = _call(client, "DELETE", f"/api/v1/webhooks/{webhook_id}", f"delete webhook {webhook_id}", accept=(404,))
    return deleted is not None
