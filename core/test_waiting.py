"""core.waiting (what a waiting job says) and RetryPolicy's retry decisions, without a database."""

import pickle
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from celery.exceptions import Retry
from hypothesis import given
from hypothesis import strategies as st

from core.task_policy import RetryPolicy
from core.waiting import MAX_REASON, BackendUnavailable, Waiting, gave_up_message

NOW = datetime(2026, 5, 4, 5, 12, 30, tzinfo=UTC)
BERLIN_SUMMER = timezone(timedelta(hours=2))


def waiting(**changes) -> Waiting:
    fields = {
        "backend": "the LLM backend 'default'",
        "reason": "connection refused",
        "since": datetime(2026, 5, 4, 5, 9, 10, tzinfo=UTC),
        "retry": 3,
        "max_retries": 8,
        "next_retry_at": NOW + timedelta(seconds=39.2),
    }
    return Waiting(**{**fields, **changes})


def test_the_message_says_who_since_when_why_and_when_next():
    assert waiting().message(now=NOW, tz=UTC) == (
        "Waiting for the LLM backend 'default' since 05:09: connection refused; retry 3 of 8, next in 40 s"
    )


def test_times_are_in_the_given_time_zone_with_the_date_when_not_today():
    assert "since 07:09:" in waiting().message(now=NOW, tz=BERLIN_SUMMER)
    yesterday = waiting(since=NOW - timedelta(days=1))
    assert "since 2026-05-03 05:12:" in yesterday.message(now=NOW, tz=UTC)


def test_a_retry_whose_time_has_come_is_due_now():
    assert waiting(next_retry_at=NOW).message(now=NOW, tz=UTC).endswith("retry 3 of 8, due now")
    assert waiting(next_retry_at=NOW - timedelta(seconds=5)).message(now=NOW, tz=UTC).endswith("due now")


def test_a_log_gets_the_time_of_day_of_the_next_retry():
    assert waiting().message(now=NOW, tz=UTC, clock=True).endswith("retry 3 of 8, next at 05:13:09")


def test_the_json_form_reads_back_as_the_same_wait():
    original = waiting()
    assert Waiting.from_json(original.as_json()) == original


def test_the_give_up_message_counts_the_retries():
    common = {"backend": "the LLM backend 'default'", "reason": "connection refused", "now": NOW, "tz": UTC}
    since = datetime(2026, 5, 4, 5, 9, tzinfo=UTC)
    assert gave_up_message(since=since, retries=8, **common) == (
        "Gave up after 8 retries: the LLM backend 'default' did not answer since 05:09 (connection refused)"
    )
    assert gave_up_message(since=since, retries=1, **common).startswith("Gave up after 1 retry:")
    assert gave_up_message(since=since, retries=0, **common).startswith("Gave up at once, without retrying:")


class ServerDown(BackendUnavailable):
    """A subclass, as the apps define theirs (transforms.backends.base.TransientBackendError)."""


def test_the_error_survives_pickling_with_what_it_says():
    error = pickle.loads(pickle.dumps(ServerDown("down", backend="b", reason="refused")))
    assert type(error) is ServerDown
    assert (str(error), error.backend, error.reason) == ("down", "b", "refused")


def test_a_long_reason_is_cut():
    error = BackendUnavailable("full message", backend="b", reason="x" * 1000)
    assert str(error) == "full message" and len(error.reason) == MAX_REASON + 1


@given(
    backoff=st.integers(1, 60),
    backoff_max=st.integers(1, 3600),
    retries=st.integers(0, 30),
)
def test_the_countdown_stays_in_the_upper_half_of_the_exponential_ceiling(backoff, backoff_max, retries):
    ceiling = min(backoff_max, backoff * 2**retries)
    countdown = RetryPolicy(backoff=backoff, backoff_max=backoff_max, max_retries=8).countdown(retries)
    assert ceiling / 2 <= countdown <= ceiling


class RecordingJob:
    def __init__(self):
        self.calls = []

    def wait(self, error, *, retry, max_retries, countdown):
        self.calls.append(("wait", retry, max_retries, countdown))

    def give_up(self, error, *, retries):
        self.calls.append(("give_up", retries))


class FakeTask:
    """What RetryPolicy.retry reads of a bound Celery task, and a retry that raises Retry."""

    def __init__(self, *, retries: int, max_retries: int, called_directly: bool = False):
        self.request = SimpleNamespace(retries=retries, called_directly=called_directly)
        self.max_retries = max_retries
        self.retried_with = None

    def retry(self, *, exc, countdown):
        self.retried_with = countdown
        return Retry(exc=exc, when=countdown)


POLICY = RetryPolicy(backoff=10, backoff_max=300, max_retries=8)
ERROR = BackendUnavailable("down", backend="the LLM backend 'default'", reason="connection refused")


def test_a_retry_left_is_recorded_on_the_job_then_scheduled():
    job, task = RecordingJob(), FakeTask(retries=2, max_retries=8)
    with pytest.raises(Retry):
        POLICY.retry(task, ERROR, job=job)
    ((kind, retry, max_retries, countdown),) = job.calls
    assert (kind, retry, max_retries) == ("wait", 3, 8)
    assert countdown == task.retried_with and 20 <= countdown <= 40


def test_when_the_tasks_retries_are_spent_the_job_fails_and_the_error_is_raised():
    # The task's max_retries counts (settings annotate eager tasks with 0), not the policy's.
    job = RecordingJob()
    with pytest.raises(BackendUnavailable):
        POLICY.retry(FakeTask(retries=0, max_retries=0), ERROR, job=job)
    assert job.calls == [("give_up", 0)]


def test_a_task_called_as_a_plain_function_leaves_the_job_alone():
    job = RecordingJob()
    with pytest.raises(BackendUnavailable):
        POLICY.retry(FakeTask(retries=0, max_retries=8, called_directly=True), ERROR, job=job)
    assert job.calls == []
