"""Request bodies, the proxy, framing and the API docs (issue 39, findings 4, 6 and 9).

4. A body is refused (413) by its Content-Length before anything reads it: a visitor who is not
   logged in may send 1 MB, a logged-in user 32 MB, or the upload limit on the dataset routes.
   Before, a 1.2 GB anonymous multipart POST to the log-in page with an invented CSRF cookie was
   spooled to a temporary file (the CSRF check reads the form) before the 403.
6. A JSON value sent as a form or multipart field (a study's ``design``) goes through the nesting
   check like a JSON body: 50,000 levels deep is a 400, not a RecursionError (500).
9. Argilla's pages say they may not be framed (the demo's launcher, and nginx in the compose file).
Also: the API docs need a log-in outside the demo, and the compose file's proxy makes
``SHIFTLAB_NUM_PROXIES=1`` true.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
import yaml
from django.conf import settings
from django.test import Client
from rest_framework import serializers

from annotation.science.design import StudyDesign
from annotation.studies.design_services import StudyCreateRequest, study_create
from core.request_body import DATASET_UPLOAD_ROUTES, FILE_ROUTES, LOGIN_ROUTES, route_name
from corpora.services import dataset_import
from tests.support import api_as, eager_keyword_run, page_as, roster_at_least, rostered
from tests.test_control_items import FIXTURES

MB = 2**20
BOUNDARY = "shiftlabboundary"
CSRF_COOKIE = "A" * 32  # invented, but of the right form: the CSRF check then reads the POSTed form
DEEP = "nested too deeply"


class MadeUpBody(io.RawIOBase):
    """A multipart body of ``size`` bytes (a CSRF field, then one file of ``x``) made up as it is
    read. Counts the bytes read and the most bytes seen in ``watch`` (the upload temp dir) meanwhile."""

    def __init__(self, size: int, watch: Path) -> None:
        self.head = (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n{CSRF_COOKIE}\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        self.tail = f"\r\n--{BOUNDARY}--\r\n".encode()
        self.size, self.watch = size, watch
        self.read_bytes = 0
        self.peak_on_disk = 0
        self._next_look = 0

    def _byte_range(self, start: int, end: int) -> bytes:
        filler_end = self.size - len(self.tail)
        out = bytearray(self.head[start:end])
        if end > len(self.head) and start < filler_end:
            out += b"x" * (min(end, filler_end) - max(start, len(self.head)))
        if end > filler_end:
            out += self.tail[max(start, filler_end) - filler_end : end - filler_end]
        return bytes(out)

    def read(self, size: int = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self.read_bytes + size)
        data = self._byte_range(self.read_bytes, end)
        self.read_bytes = end
        if self.read_bytes >= self._next_look:
            self._next_look = self.read_bytes + MB
            self.peak_on_disk = max(self.peak_on_disk, sum(p.stat().st_size for p in self.watch.iterdir()))
        return data

    def readline(self, size: int = -1) -> bytes:
        return self.read(size if size and size > 0 else 64 * 1024)


def _post_made_up(client: Client, path: str, body: MadeUpBody, *, length: bool = True):
    # Django's client sets CONTENT_TYPE only with data, DRF's always from content_type: both given.
    content_type = f"multipart/form-data; boundary={BOUNDARY}"
    environ: dict[str, object] = {"wsgi.input": body, "CONTENT_TYPE": content_type}
    if length:
        environ["CONTENT_LENGTH"] = str(body.size)
    else:
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
    return client.generic("POST", path, content_type=content_type, **environ)


@pytest.fixture
def upload_dir(tmp_path, settings) -> Path:
    """Where Django's upload handlers would spool files (watched by ``MadeUpBody``)."""
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    return tmp_path


# --- 4. bodies limited before they are read --------------------------------------------------------


@pytest.mark.django_db
def test_a_200_mb_anonymous_post_to_the_log_in_page_is_refused_unread(upload_dir):
    """The finding's request (smaller): an invented CSRF cookie, so that the CSRF check reads the form."""
    client = Client(enforce_csrf_checks=True)
    client.cookies["csrftoken"] = CSRF_COOKIE
    body = MadeUpBody(200 * MB, upload_dir)
    answer = _post_made_up(client, "/accounts/login/", body)
    assert answer.status_code == 413, answer.status_code
    text = b"".join(answer.streaming_content).decode()
    assert "200.0 MB, more than the 1.0 MB allowed before logging in" in text and "Log in first" in text
    assert body.read_bytes == 0 and body.peak_on_disk == 0 and not list(upload_dir.iterdir())


@pytest.mark.django_db
def test_a_chunked_anonymous_post_without_content_length_is_never_read(upload_dir):
    """Without Content-Length Django (WSGI) reads no body at all: the CSRF check finds no token."""
    client = Client(enforce_csrf_checks=True)
    client.cookies["csrftoken"] = CSRF_COOKIE
    body = MadeUpBody(200 * MB, upload_dir)
    answer = _post_made_up(client, "/accounts/login/", body, length=False)
    assert answer.status_code == 403
    assert body.read_bytes == 0 and not list(upload_dir.iterdir())


@pytest.mark.django_db
def test_logged_in_limits_per_route(researcher, upload_dir, settings):
    settings.SHIFTLAB_MAX_REQUEST_MB = 1
    settings.DATASET_MAX_UPLOAD_MB = 2
    page = page_as(researcher)
    body = MadeUpBody(2 * MB, upload_dir)
    answer = _post_made_up(page, "/projects/", body)
    assert answer.status_code == 413 and body.read_bytes == 0
    assert "over the 1 MB a request may carry (SHIFTLAB_MAX_REQUEST_MB)" in b"".join(answer.streaming_content).decode()
    # The dataset routes take SHIFTLAB_MAX_UPLOAD_MB + 1 (the form around the files), page and API alike.
    for client, path in ((page, "/datasets/"), (api_as(researcher), "/api/dataset-imports/")):
        body = MadeUpBody(4 * MB, upload_dir)
        answer = _post_made_up(client, path, body)
        assert answer.status_code == 413 and body.read_bytes == 0, path
        text = b"".join(answer.streaming_content).decode()
        assert "over the 2 MB upload limit (SHIFTLAB_MAX_UPLOAD_MB); nothing was stored" in text
        assert ("application/json" in answer["Content-Type"]) == path.startswith("/api/")


@pytest.mark.django_db
def test_files_sent_where_none_is_taken_are_never_written(researcher, upload_dir):
    """3 MB is over FILE_UPLOAD_MAX_MEMORY_SIZE: Django's handlers would spool it to a temporary file."""
    client = Client(enforce_csrf_checks=True)  # so that the CSRF check reads the form
    client.force_login(researcher)
    client.cookies["csrftoken"] = CSRF_COOKIE
    body = MadeUpBody(3 * MB, upload_dir)
    answer = _post_made_up(client, "/projects/", body)
    assert answer.status_code in (200, 403)  # the form itself is refused: researchers do not create projects
    assert body.read_bytes == 3 * MB and body.peak_on_disk == 0 and not list(upload_dir.iterdir())


@pytest.mark.django_db
def test_an_upload_within_the_limits_still_spools_and_imports(researcher, upload_dir, settings):
    """A logged-in upload on a dataset route keeps Django's handlers: a file over
    FILE_UPLOAD_MAX_MEMORY_SIZE goes to a temporary file, as before, and is imported."""
    settings.SHIFTLAB_MAX_REQUEST_MB = 1
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    rows = "".join(f"A sentence number {k:05d} here.,Another one {k:05d}.,3\n" for k in range(5_000))
    data = ("sentence1,sentence2,score\n" + rows).encode()
    assert len(data) > 3 * 64 * 1024, len(data)
    seen: list[int] = []

    class Watched(io.BytesIO):
        def read(self, size=-1):
            seen.append(sum(p.stat().st_size for p in upload_dir.iterdir()))
            return super().read(size)

    fields = {"name": "big-sts", "task_type": "sts"}
    parts = b"".join(
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()
    )
    payload = (
        parts
        + f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="files"; filename="big.csv"\r\n'
        "Content-Type: text/csv\r\n\r\n".encode()
        + data
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    content_type = f"multipart/form-data; boundary={BOUNDARY}"
    answer = api_as(researcher).generic(
        "POST",
        "/api/dataset-imports/",
        content_type=content_type,
        **{"wsgi.input": Watched(payload), "CONTENT_LENGTH": str(len(payload)), "CONTENT_TYPE": content_type},
    )
    assert answer.status_code in (201, 202), answer.content[:500]
    assert max(seen) > 0  # spooled to the temporary file, as before


@pytest.mark.django_db(transaction=True)
def test_the_development_server_answers_413_at_once_and_closes_without_reading(live_server):
    """Django's own server (the demo's) reads what a response left unread before closing; a
    refused 1 GB body now leaves it unread: the 413 comes at once and the connection closes."""
    host, port = live_server.url.removeprefix("http://").split(":")
    head = (
        f"POST /accounts/login/ HTTP/1.1\r\nHost: {host}\r\nContent-Length: {2**30}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nCookie: csrftoken={CSRF_COOKIE}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        # Far less than announced: a server reading the body would wait for the rest. (A few bytes
        # only, read with the headers: unread bytes left in the socket would make the close a reset.)
        sock.sendall(head + b"x" * 1000)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except TimeoutError:
            pytest.fail(f"the server kept the connection open (reading the body?); got {answer[:200]!r}")
    took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"Connection: close" in answer and took < 5, took


def test_the_routes_named_by_the_limits_exist():
    """The limits name routes by URL name: a renamed route would silently lose its limit."""
    paths = {
        "corpora:list": "/datasets/",
        "dataset-import-list": "/api/dataset-imports/",
        "evaluation:benchmarks": "/benchmarks/",
        "annotation:study": "/annotation/studies/1/",
        "annotation:publish": "/annotation/studies/1/publish/",
        "study-lock": "/api/studies/1/lock/",
        "login": "/accounts/login/",
        "api-token": "/api/auth/token/",
        "admin:login": "/admin/login/",
    }
    assert set(paths) == FILE_ROUTES | LOGIN_ROUTES and DATASET_UPLOAD_ROUTES <= FILE_ROUTES
    assert {name: route_name(path) for name, path in paths.items()} == {name: name for name in paths}


# --- 6. nesting in form fields ---------------------------------------------------------------------


def _deep_design() -> str:
    return '{"seed": ' + "[" * 50_000 + "]" * 50_000 + "}"


@pytest.fixture
def draft_study(researcher):
    intents = dataset_import(source=FIXTURES / "classification/demo-intents", task="classification", name="intents")
    run = eager_keyword_run(intents, limit=20)
    design = StudyDesign(items_per_transformation=8, batch_size=4, controls_per_batch=2, llm_judges=(), seed=3)
    roster_at_least(run.project, design.raters_per_item)
    return study_create(actor=None, request=rostered(StudyCreateRequest(name="deep-design", runs=[run], design=design)))


@pytest.mark.django_db
@pytest.mark.parametrize("encoding", ["urlencoded", "multipart", "json"])
def test_a_deep_design_is_a_400_in_every_encoding(researcher, draft_study, encoding):
    client = api_as(researcher)
    deep = _deep_design()
    for path, fields in (
        ("/api/studies/", {"name": "deep", "runs": str(draft_study.runs.first().pk), "design": deep}),
        (f"/api/studies/{draft_study.pk}/design/", {"design": deep}),
    ):
        if encoding == "urlencoded":
            answer = client.post(path, urlencode(fields), content_type="application/x-www-form-urlencoded")
        elif encoding == "multipart":
            answer = client.post(path, fields, format="multipart")
        else:  # the JSON body: the JSON parser counts the nesting (issue 27)
            body = '{"name": "deep", "design": ' + deep + "}"
            answer = client.post(path, body, content_type="application/json")
        assert answer.status_code == 400, (path, answer.status_code)
        assert DEEP in json.dumps(answer.json()), answer.json()
        if encoding != "json":
            assert DEEP in answer.json()["design"][0]


@pytest.mark.django_db
def test_a_design_sent_as_a_form_field_still_works(researcher, draft_study):
    answer = api_as(researcher).post(
        f"/api/studies/{draft_study.pk}/design/", {"design": json.dumps({"seed": 11})}, format="multipart"
    )
    assert answer.status_code == 200, answer.content[:500]
    assert answer.json()["design"]["seed"] == 11


PROJECT_APPS = {"core", "corpora", "transforms", "annotation", "evaluation"}


def _all_subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _all_subclasses(sub)
    return found


def test_every_writable_json_field_of_the_api_counts_the_nesting():
    """A field that parses JSON text from a form must be ``core.serializers.JSONField``."""
    import shiftlab.urls  # noqa: F401  (loads every app's API and its serializers)
    from core.serializers import JSONField

    offenders, checked = [], set()
    for serializer_class in _all_subclasses(serializers.Serializer):
        if serializer_class.__module__.split(".")[0] not in PROJECT_APPS:
            continue
        try:
            fields = serializer_class().fields
        except Exception:  # noqa: BLE001, S112 - a serializer that needs context to build its fields
            continue
        checked.add(serializer_class.__name__)
        for name, field in fields.items():
            if isinstance(field, serializers.JSONField) and not field.read_only and not isinstance(field, JSONField):
                offenders.append(f"{serializer_class.__module__}.{serializer_class.__name__}.{name}")
    assert {"StudyCreateSerializer", "StudyDesignSerializer", "DatasetImportCreateSerializer"} <= checked
    assert not offenders


# --- API docs -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_api_docs_need_a_log_in_outside_the_demo(researcher, settings):
    settings.SHIFTLAB_PUBLIC_API_DOCS = False
    anonymous = Client()
    assert anonymous.get("/api/schema/").status_code == 401
    for path in ("/api/docs/", "/api/redoc/"):
        answer = anonymous.get(path)
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/?next="), path
    assert page_as(researcher).get("/api/docs/").status_code == 200
    assert page_as(researcher).get("/api/schema/").status_code == 200
    assert api_as(researcher).get("/api/schema/").status_code == 200


@pytest.mark.django_db
def test_api_docs_are_public_in_the_demo_and_private_in_production(settings):
    assert settings.SHIFTLAB_PUBLIC_API_DOCS  # the base settings are the demo's
    assert Client().get("/api/schema/").status_code == 200
    assert Client().get("/api/docs/").status_code == 200
    production = (Path(settings.BASE_DIR) / "shiftlab/settings_production.py").read_text()
    assert 'SHIFTLAB_PUBLIC_API_DOCS = env_bool("SHIFTLAB_PUBLIC_API_DOCS", False)' in production


# --- 9. Argilla's pages are not framed --------------------------------------------------------------


def _launcher():
    path = Path(settings.BASE_DIR) / "annotation/argilla_local/launcher.py"
    spec = importlib.util.spec_from_file_location("argilla_launcher_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_local_argilla_server_sends_frame_headers():
    """The launcher serves Argilla's app inside ``DenyFraming`` (it cannot run Argilla here: its own
    virtualenv), which adds the headers to every HTTP response, beside any policy of the app's."""
    launcher = _launcher()
    sent = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-security-policy", b"x")]})
        await send({"type": "http.response.body", "body": b"ok"})

    async def collect(message):
        sent.append(message)

    asyncio.run(launcher.DenyFraming(app)({"type": "http"}, None, collect))
    headers = sent[0]["headers"]
    assert (b"x-frame-options", b"DENY") in headers
    assert (b"content-security-policy", b"frame-ancestors 'none'") in headers
    assert (b"content-security-policy", b"x") in headers  # the app's own policy stays
    assert sent[1] == {"type": "http.response.body", "body": b"ok"}
    source = (Path(settings.BASE_DIR) / "annotation/argilla_local/launcher.py").read_text()
    assert "uvicorn.Config(DenyFraming(app)," in source


@pytest.mark.services
def test_the_real_local_argilla_server_is_not_framed(argilla_server):
    import httpx

    answer = httpx.get(argilla_server.url + "/", timeout=30, follow_redirects=True)
    assert answer.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in answer.headers.get_list("content-security-policy")


# --- the proxy of the compose file ----------------------------------------------------------------

NGINX_CONF = Path(settings.BASE_DIR) / "deploy/nginx/shiftlab.conf"


def _compose() -> dict:
    return yaml.safe_load((Path(settings.BASE_DIR) / "docker-compose.yml").read_text())


def test_only_the_proxy_is_published_and_num_proxies_is_true():
    services = _compose()["services"]
    assert "ports" not in services["web"] and "ports" not in services["argilla"]
    assert {"80:80", "443:443", "6900:6900"} == set(services["proxy"]["ports"])
    published = {name for name, service in services.items() if "ports" in service}
    # flower and vllm are published on loopback only.
    assert all(p.startswith("127.0.0.1:") for name in published - {"proxy"} for p in services[name]["ports"])
    assert services["web"]["environment"]["SHIFTLAB_NUM_PROXIES"] == "1"
    assert "./deploy/nginx/shiftlab.conf:/etc/nginx/conf.d/default.conf:ro" in services["proxy"]["volumes"]
    assert settings.REST_FRAMEWORK["NUM_PROXIES"] == 0  # the demo: no proxy


def test_the_proxy_limits_match_the_settings_and_deny_framing_argilla():
    conf = NGINX_CONF.read_text()
    sizes = re.findall(r"^\s*client_max_body_size (\d+)m;", conf, flags=re.MULTILINE)
    assert sizes[0] == str(settings.SHIFTLAB_MAX_REQUEST_MB + 1)
    assert sizes[1:3] == [str(settings.DATASET_MAX_UPLOAD_MB + 1)] * 2
    assert "location = /datasets/" in conf and "location = /api/dataset-imports/" in conf
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in conf  # the client's, never one it sent
    assert "large_client_header_buffers 4 8k;" in conf
    argilla = conf[conf.index("server argilla:6900") :]
    assert 'add_header X-Frame-Options "DENY" always;' in argilla
    assert "add_header Content-Security-Policy \"frame-ancestors 'none'\" always;" in argilla


def test_the_proxy_config_is_valid_nginx(tmp_path):
    """``nginx -t`` on the config, where nginx is installed (the compose names resolve to loopback)."""
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        pytest.skip("nginx is not installed (apt-get install nginx-light)")
    tls = tmp_path / "tls"
    tls.mkdir()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-keyout", str(tls / "privkey.pem"), "-out", str(tls / "fullchain.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    conf = NGINX_CONF.read_text().replace("server web:8000", "server 127.0.0.1:8000")
    conf = conf.replace("server argilla:6900", "server 127.0.0.1:6900").replace("/etc/nginx/tls", str(tls))
    (tmp_path / "site.conf").write_text(conf)
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n  access_log off;\n  client_body_temp_path {tmp_path}/body;\n  proxy_temp_path {tmp_path}/proxy;\n"
        f"  include {tmp_path}/site.conf;\n}}\n"
    )
    command = [nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
