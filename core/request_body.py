"""How large a request body may be, decided before anything reads it (issue 39, finding 4).

A body is refused by its ``Content-Length`` alone (``RequestBodyLimitMiddleware``), so a refused
body is never read, let alone written to disk:

- a visitor who is not logged in may send ``SHIFTLAB_MAX_ANONYMOUS_REQUEST_KB`` (the log-in form,
  the token endpoint and Argilla's webhook need far less); so may anyone on the log-in routes;
- a logged-in user ``SHIFTLAB_MAX_REQUEST_MB`` on every route, and on the dataset upload routes
  ``SHIFTLAB_MAX_UPLOAD_MB`` plus 1 MB for the form around the files.

Files in a multipart body are kept only on the routes that take files, from logged-in users;
anywhere else their bytes are read past and dropped (``DiscardFilesUploadHandler``), so Django's
upload handlers never spool them to a temporary file.

A body without ``Content-Length`` (chunked) is never read by Django under WSGI: the request sees
an empty body. The API's callers are known only once DRF has authenticated them, which it does
before any parser reads the body; an anonymous API call is refused (401) unread.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopFutureHandlers
from django.http import HttpRequest
from django.urls import Resolver404, resolve

MB = 2**20

# URL names (namespace:name) of the routes that take large uploads, and of all routes that take files.
DATASET_UPLOAD_ROUTES = frozenset({"corpora:list", "dataset-import-list"})
FILE_ROUTES = DATASET_UPLOAD_ROUTES | {
    "evaluation:benchmarks",  # a benchmark config file
    "annotation:study",  # a control pool, when the study is locked
    "annotation:publish",
    "study-lock",
}
# Routes for callers who are not logged in yet: the visitor's limit, whoever calls.
LOGIN_ROUTES = frozenset({"login", "api-token", "admin:login"})


@dataclass(frozen=True)
class BodyLimit:
    size: int  # bytes
    keeps_files: bool
    kind: str  # "anonymous", "dataset" or "request": which setting sets it


def route_name(path: str) -> str | None:
    """The URL name of ``path`` (with its namespace), or None when no route matches."""
    try:
        return resolve(path).view_name
    except Resolver404:
        return None


def body_limit(*, route: str | None, anonymous: bool) -> BodyLimit:
    """The largest body a caller may send to ``route``, and whether its files are kept."""
    if anonymous or route in LOGIN_ROUTES:
        return BodyLimit(settings.SHIFTLAB_MAX_ANONYMOUS_REQUEST_KB * 1024, False, "anonymous")
    general = settings.SHIFTLAB_MAX_REQUEST_MB * MB
    if route in DATASET_UPLOAD_ROUTES:
        return BodyLimit(max(general, (settings.DATASET_MAX_UPLOAD_MB + 1) * MB), True, "dataset")
    return BodyLimit(general, route in FILE_ROUTES, "request")


def content_length(request: HttpRequest) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def size_words(size: int) -> str:
    return f"{size / MB:.1f} MB" if size >= MB else f"{size / 1024:.0f} KB"


def too_large_message(size: int, limit: BodyLimit) -> str:
    """What to tell the sender of a body over ``limit``: the sizes, and what to do instead."""
    sent = f"This request carries {size_words(size)}"
    if limit.kind == "anonymous":
        return (
            f"{sent}, more than the {size_words(limit.size)} allowed before logging in "
            "(SHIFTLAB_MAX_ANONYMOUS_REQUEST_KB). Log in first, then send it again."
        )
    if limit.kind == "dataset":
        return (
            f"{sent}, over the {settings.DATASET_MAX_UPLOAD_MB} MB upload limit (SHIFTLAB_MAX_UPLOAD_MB); nothing "
            "was stored. Upload smaller files, or import the dataset on the server with: "
            "python manage.py corpora import PATH --task TASK --name NAME"
        )
    return (
        f"{sent}, over the {settings.SHIFTLAB_MAX_REQUEST_MB} MB a request may carry (SHIFTLAB_MAX_REQUEST_MB): "
        "send less per request; datasets are uploaded on the Datasets page or with POST /api/dataset-imports/."
    )


class DiscardFilesUploadHandler(FileUploadHandler):
    """File parts of a multipart body where no file is taken: read past and dropped, never kept in
    memory or written to a temporary file (the form fields around them are parsed as usual)."""

    def new_file(self, *args, **kwargs) -> None:
        super().new_file(*args, **kwargs)
        raise StopFutureHandlers()  # no other handler opens a file for it

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        return None

    def file_complete(self, file_size: int) -> None:
        return None
