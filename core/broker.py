"""What Shiftlab reads from and writes to the Redis broker behind Celery (kombu's Redis transport).

Two things Celery does not offer:

* **Live tasks**: which tasks are queued or handed to a worker and not yet acknowledged. With
  ``acks_late`` every such task is either in a queue's list or in the transport's ``unacked`` hash
  (a worker that died leaves its task there until the visibility timeout hands it out again), so
  the two together say whether a job still has a task that will run.
* **Heartbeat**: the transport hands a task out again when it has been unacknowledged for the
  visibility timeout, whether its worker died or is merely busy. A short timeout (minutes) is
  what makes a lost task come back quickly; the heartbeat keeps it from taking long tasks away
  from live workers, by refreshing the delivery time of every task this worker holds.
"""

from __future__ import annotations

import ast
import json
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

import redis
from celery import Celery

logger = logging.getLogger(__name__)

# kombu's Redis transport: the hash and sorted set of unacknowledged deliveries, and the separator
# of a queue's priority lists ("queue\x06\x163" holds priority 3).
UNACKED_KEY = "unacked"
UNACKED_INDEX_KEY = "unacked_index"
PRIORITY_SEPARATOR = "\x06\x16"
PRIORITY_STEPS = (3, 6, 9)


def _client(app: Celery) -> redis.Redis:
    return redis.Redis.from_url(app.conf.broker_url, socket_connect_timeout=5, socket_timeout=10)


def _queue_names(app: Celery) -> set[str]:
    names = {app.conf.task_default_queue, *app.amqp.queues.keys()}
    routes = app.conf.task_routes or {}
    if isinstance(routes, dict):
        names |= {route["queue"] for route in routes.values() if isinstance(route, dict) and "queue" in route}
    return {name for name in names if name}


def _task_and_args(message: dict[str, Any]) -> tuple[str, tuple] | None:
    headers = message.get("headers") or {}
    name = headers.get("task")
    if not name:
        return None
    try:
        args = ast.literal_eval(headers.get("argsrepr") or "()")
    except (ValueError, SyntaxError):
        return None
    return name, tuple(args) if isinstance(args, list | tuple) else ()


def live_tasks(app: Celery, task_names: Iterable[str]) -> set[tuple[str, Any]]:
    """``(task name, first argument)`` of every task of ``task_names`` that is queued or held
    unacknowledged by a worker. Raises ``redis.RedisError`` when the broker cannot be read."""
    wanted = set(task_names)
    client = _client(app)
    raw: list[bytes] = []
    for queue in _queue_names(app):
        for key in (queue, *(f"{queue}{PRIORITY_SEPARATOR}{step}" for step in PRIORITY_STEPS)):
            raw.extend(client.lrange(key, 0, -1))
    for delivery in client.hvals(UNACKED_KEY):
        try:
            raw.append(json.dumps(json.loads(delivery)[0]).encode())
        except (ValueError, IndexError, TypeError):
            continue
    found = set()
    for body in raw:
        try:
            parsed = _task_and_args(json.loads(body))
        except ValueError:
            continue
        if parsed and parsed[0] in wanted and parsed[1]:
            found.add((parsed[0], parsed[1][0]))
    return found


class Heartbeat(threading.Thread):
    """Every ``interval`` seconds, mark the deliveries this worker holds (running, waiting for a
    free process, or waiting for a retry's countdown) as delivered now."""

    def __init__(self, app: Celery, *, interval: float):
        super().__init__(name="shiftlab-broker-heartbeat", daemon=True)
        self.app = app
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        from celery.worker import state

        client = _client(self.app)
        while not self.stopped.wait(self.interval):
            tags = [tag for request in list(state.reserved_requests) if (tag := _delivery_tag(request))]
            if not tags:
                continue
            try:
                # XX: only refresh deliveries still listed; an acknowledged task is not brought back.
                client.zadd(UNACKED_INDEX_KEY, dict.fromkeys(tags, time.time()), xx=True)
            except redis.RedisError as exc:
                logger.warning("broker heartbeat failed (tasks may be handed out again): %s", exc)


def _delivery_tag(request) -> str | None:
    message = getattr(request, "message", None)
    tag = getattr(message, "delivery_tag", None)
    return str(tag) if tag else None
