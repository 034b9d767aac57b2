"""Progress that moves (issue 41, item 3): a transformation run and a judge report count what is
done per text (per LLM call) while a batch is in flight, a redelivered chunk never counts a text
twice, and a job whose backend is held by another job says which one ("busy with run #7"), or that
it waits for its first answer.

The LLM is a real loopback OpenAI-style server answering one request at a time (``max_concurrency``
1), so texts finish in a known order; what the run's row holds is read after every write the task
makes to it (Django's ``execute_wrapper``), i.e. what a page polling it could show.
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from core.waiting import Waiting
from corpora.services import dataset_import
from tests.support import api_as, page_as
from transforms import llm_activity
from transforms.backends import reset_backends
from transforms.backends.base import TransientBackendError
from transforms.chunk_services import transform_run_execute_chunk
from transforms.judge_services import judge_report_create_evaluation, judge_report_execute
from transforms.llm_activity import LLMCalls
from transforms.models import JudgeReport, LLMBackendUse, TransformedItem, TransformRun
from transforms.params import GenerationParams
from transforms.services import transform_run_create, transform_run_note_queued, transform_run_pending_chunks

SINCE = r"since \d\d:\d\d"


@contextmanager
def llm_stub(answer: Callable[[int], tuple[int, str]]) -> Iterator[str]:
    """A loopback OpenAI-style server; ``answer(n)`` gives the status and text of the n-th chat
    request (0-based). Yields its base URL."""
    lock, count = threading.Lock(), [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status: int, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(404, {"error": "no such page"})

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            with lock:
                n, count[0] = count[0], count[0] + 1
            status, text = answer(n)
            self._send(status, {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def use_stub(settings, base_url: str, *, alias: str = "default") -> None:
    settings.TRANSFORM_BACKENDS = {
        **settings.TRANSFORM_BACKENDS,
        alias: {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {"base_url": base_url, "model": f"stub-{alias}", "max_retries": 0, "max_concurrency": 1},
        },
    }
    reset_backends()


@contextmanager
def row_history(model, pk: int, fields: tuple[str, ...]) -> Iterator[list[tuple]]:
    """``fields`` of the job's row after every UPDATE of its table, in order."""
    table = model._meta.db_table
    seen: list[tuple] = []
    reading = threading.local()

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.lstrip().upper().startswith("UPDATE") and table in sql and not getattr(reading, "on", False):
            reading.on = True
            try:
                seen.append(model.objects.filter(pk=pk).values_list(*fields).get())
            finally:
                reading.on = False
        return result

    with connection.execute_wrapper(wrapper):
        yield seen


@pytest.fixture
def sts(db, settings, monkeypatch):
    settings.TRANSFORM_CHUNK_SIZE = 50
    monkeypatch.setattr(llm_activity, "FLUSH_EVERY_S", 0.0)  # every answer is written: a known sequence
    yield dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="live-sts")
    reset_backends()


def paraphrase_run(dataset, *, limit: int, alias: str = "default") -> TransformRun:
    run = transform_run_create(
        dataset=dataset,
        transformation="paraphrase",
        seed=1,
        limit=limit,
        backend_alias=alias,
        params=GenerationParams(max_tokens=16, max_attempts=1),
        dispatch=False,
    )
    TransformRun.objects.filter(pk=run.pk).update(status="running")
    return run


def one_chunk(run: TransformRun) -> list[int]:
    (chunk,) = transform_run_pending_chunks(run_id=run.pk)
    return chunk


def stored(run: TransformRun) -> int:
    return TransformedItem.objects.filter(run=run).count()


def test_a_chunk_counts_its_texts_one_by_one_as_they_finish(sts, settings):
    with llm_stub(lambda n: (200, f"A rewritten sentence number {n}.")) as url:
        use_stub(settings, url)
        run = paraphrase_run(sts, limit=3)  # 3 pairs: 6 distinct texts
        with row_history(TransformRun, run.pk, ("done", "llm_calls")) as history:
            added = transform_run_execute_chunk(run_id=run.pk, item_ids=one_chunk(run))
    assert added == 6 and stored(run) == 6
    done = [d for d, _ in history]
    # Each answer is stored and counted before the next one arrives: 1, 2, ... 6, never back.
    assert sorted(set(done)) == [1, 2, 3, 4, 5, 6], history
    assert done == sorted(done)
    assert [calls for d, calls in history if d < 6] == [1, 2, 3, 4, 5]
    run.refresh_from_db()
    assert (run.done, run.llm_calls, run.status, run.waiting) == (6, 6, "succeeded", None)


def test_a_redelivered_chunk_does_not_count_twice(sts, settings):
    # The server answers two requests, then is overloaded (503) until it answers again.
    overloaded = threading.Event()
    overloaded.set()

    def answer(n: int) -> tuple[int, str]:
        if n >= 2 and overloaded.is_set():
            return 503, "busy"
        return 200, f"Another way to say sentence {n}."

    with llm_stub(answer) as url:
        use_stub(settings, url)
        run = paraphrase_run(sts, limit=2)  # 4 texts
        chunk = one_chunk(run)
        with pytest.raises(TransientBackendError):
            transform_run_execute_chunk(run_id=run.pk, item_ids=chunk)
        run.refresh_from_db()
        # What was answered before the failure is stored and counted, once.
        assert (run.done, run.llm_calls, stored(run)) == (2, 2, 2)
        assert not LLMBackendUse.objects.exists(), "a failed batch releases the backend"

        overloaded.clear()
        with row_history(TransformRun, run.pk, ("done",)) as history:
            added = transform_run_execute_chunk(run_id=run.pk, item_ids=chunk)
            transform_run_execute_chunk(run_id=run.pk, item_ids=chunk)  # delivered once more: adds nothing
    run.refresh_from_db()
    assert added == 2 and stored(run) == 4
    assert [d for (d,) in history if d < 4] == [3]
    assert max(d for (d,) in history) == 4 == run.done
    assert run.llm_calls == 4  # the two stored texts were not asked again


def test_a_run_queued_behind_another_job_names_it(sts, settings, researcher):
    with llm_stub(lambda n: (200, f"Said otherwise, sentence {n}.")) as url:
        use_stub(settings, url)
        holder = paraphrase_run(sts, limit=1)
        waiting = paraphrase_run(sts, limit=2)
        expected = rf"Waiting for the LLM backend 'default' \(busy with run #{holder.pk}\) {SINCE}"
        with LLMCalls(model=TransformRun, job_id=holder.pk, label=f"run #{holder.pk}", alias="default"):
            # What start_run does as it queues the run's chunks behind the holder's.
            transform_run_note_queued(run_id=waiting.pk)
            api = api_as(researcher).get(f"/api/transform-runs/{waiting.pk}/").json()
            page = html.unescape(page_as(researcher).get(f"/transforms/runs/{waiting.pk}/").content.decode())
            out = StringIO()
            call_command("transform", "--run", str(waiting.pk), stdout=out)
            assert re.fullmatch(expected, api["waiting_message"]), api["waiting_message"]
            assert re.search(expected, page) and 'name="shiftlab-poll" content="1"' in page
            assert re.search(expected, out.getvalue()), out.getvalue()
            runs_page = page_as(researcher).get("/transforms/").content.decode()
            assert f"waiting: LLM busy with run #{holder.pk}" in runs_page

            # Its chunk starts while the holder still holds the backend: the first write says so,
            # and its first answer ends the wait.
            with row_history(TransformRun, waiting.pk, ("waiting", "done")) as history:
                transform_run_execute_chunk(run_id=waiting.pk, item_ids=one_chunk(waiting))
            assert Waiting.from_json(history[0][0]).busy_with == f"run #{holder.pk}"
            assert next(w for w, done in history if done == 1) is None
        assert not LLMBackendUse.objects.exists()


def test_a_wait_names_the_next_holder_or_the_first_answer_once_the_holder_is_done(sts, settings):
    with llm_stub(lambda n: (200, "unused")) as url:
        use_stub(settings, url)
        first, second, queued = (paraphrase_run(sts, limit=1) for _ in range(3))
    with LLMCalls(model=TransformRun, job_id=first.pk, label=f"run #{first.pk}", alias="default"):
        with LLMCalls(model=TransformRun, job_id=second.pk, label=f"run #{second.pk}", alias="default"):
            transform_run_note_queued(run_id=queued.pk)
            queued.refresh_from_db()
            assert queued.waiting_state.busy_with == f"run #{first.pk}"  # the one that holds it longest
        queued.refresh_from_db()
        assert queued.waiting_state.busy_with == f"run #{first.pk}"
    queued.refresh_from_db()
    assert queued.waiting_state.busy_with == "" and not queued.waiting_state.retrying
    assert re.fullmatch(rf"Waiting for the first answer of the LLM backend 'default' {SINCE}", queued.waiting_message)


def test_a_batch_without_a_first_answer_says_it_waits(sts, settings, monkeypatch):
    monkeypatch.setattr(llm_activity, "FIRST_ANSWER_GRACE_S", 0.0)
    said = threading.Event()

    def answer(n: int) -> tuple[int, str]:
        said.wait(timeout=10)  # the first answer comes only once the run has said that it waits
        return 200, f"Rephrased sentence {n}."

    with llm_stub(answer) as url:
        use_stub(settings, url)
        run = paraphrase_run(sts, limit=1)
        seen: list[str | None] = []

        def note(execute, sql, params, many, context):
            result = execute(sql, params, many, context)
            if sql.lstrip().upper().startswith("UPDATE") and TransformRun._meta.db_table in sql and not said.is_set():
                run.refresh_from_db(fields=["waiting", "status"])
                seen.append(run.waiting_message)
                if run.waiting_message:
                    said.set()
            return result

        with connection.execute_wrapper(note):
            transform_run_execute_chunk(run_id=run.pk, item_ids=one_chunk(run))
    assert said.is_set(), seen
    assert re.fullmatch(rf"Waiting for the first answer of the LLM backend 'default' {SINCE}", seen[-1]), seen
    run.refresh_from_db()
    assert (run.done, run.waiting) == (2, None)


def test_a_judge_report_counts_each_judgement_as_it_arrives(sts, settings):
    with llm_stub(lambda n: (200, "3")) as url:
        use_stub(settings, url)
        report = judge_report_create_evaluation(dataset=sts, limit=5, dispatch=False)
        with row_history(JudgeReport, report.pk, ("done", "total")) as history:
            judge_report_execute(report_id=report.pk)
    report.refresh_from_db()
    assert report.status == "succeeded" and report.done == report.total == 5
    done = [d for d, total in history if total == 5]
    assert sorted(set(done)) == [0, 1, 2, 3, 4, 5], history
    assert done == sorted(done)


def test_waits_for_a_busy_backend_read_and_write_as_json():
    since = datetime(2026, 1, 2, 5, 9, tzinfo=UTC)
    busy = Waiting.busy(backend="the LLM backend 'default'", since=since, busy_with="run #7")
    assert Waiting.from_json(busy.as_json()) == busy and not busy.retrying
    now = since + timedelta(minutes=1)
    assert busy.message(now=now, tz=UTC) == "Waiting for the LLM backend 'default' (busy with run #7) since 05:09"
    first = Waiting.first_answer(backend="the LLM backend 'default'", since=since)
    assert first.message(now=now, tz=UTC) == "Waiting for the first answer of the LLM backend 'default' since 05:09"
    # A retry's wait, as stored before busy waits existed, still reads the same.
    old = {
        "backend": "b",
        "reason": "refused",
        "since": since.isoformat(),
        "retry": 1,
        "max_retries": 8,
        "next_retry_at": (since + timedelta(seconds=40)).isoformat(),
    }
    assert Waiting.from_json(old).retrying and Waiting.from_json(old).as_json() == old
