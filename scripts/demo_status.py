"""Print one line per demo service (web, worker, LLM, Argilla, Redis) once they are up.

Run by scripts/demo.sh beside the web server. It waits for the first page, signs in as the demo
admin (the per-service detail of /health/ is for staff only), then polls /health/ and pings the
Celery workers until every service is ok or ``--timeout`` runs out, and prints the states either
way with the seconds since the demo started; with ``--watch N`` it then prints a line whenever a
service changes state. Plain Python with requests and celery: no Django.
"""

from __future__ import annotations

import argparse
import sys
import time

import requests
from celery import Celery

POLL_SECONDS = 2.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="the web server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--username", default="admin", help="a staff account (default: admin)")
    parser.add_argument("--password", required=True)
    parser.add_argument("--since", type=float, default=None, help="epoch seconds the demo started")
    parser.add_argument("--broker-url", default="", help="CELERY_BROKER_URL; empty: tasks run eagerly")
    parser.add_argument("--redis-note", default="", help="where the Redis comes from, shown on its line")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for all ok")
    parser.add_argument(
        "--watch", type=float, default=0.0, help="then keep polling every N seconds and print state changes"
    )
    return parser.parse_args(argv)


def wait_first_page(session: requests.Session, url: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            if session.get(f"{url}/accounts/login/", timeout=5).status_code == 200:
                return True
        except requests.RequestException:
            pass
        time.sleep(0.5)
    return False


def sign_in(session: requests.Session, url: str, username: str, password: str) -> None:
    login = f"{url}/accounts/login/"
    session.get(login, timeout=10)
    data = {"username": username, "password": password, "csrfmiddlewaretoken": session.cookies.get("csrftoken", "")}
    session.post(login, data=data, headers={"Referer": login}, timeout=10)


def health_checks(session: requests.Session, url: str) -> dict[str, dict[str, str]]:
    try:
        body = session.get(f"{url}/health/", timeout=15).json()
    except (requests.RequestException, ValueError) as exc:
        return {"web": {"status": "error", "detail": f"/health/ did not answer: {exc.__class__.__name__}"}}
    return body.get("checks") or {"web": {"status": "error", "detail": "no per-service detail: not signed in as staff"}}


def worker_state(broker_url: str) -> tuple[str, str]:
    if not broker_url:
        return "eager", "no Redis: tasks run inside the web process"
    try:
        replies = Celery(broker=broker_url).control.ping(timeout=1.0)
    except Exception as exc:  # kombu raises transport-specific errors
        return "error", f"cannot ask the workers: {exc.__class__.__name__}"
    if not replies:
        return "error", "no Celery worker answered (log: var/log/celery_worker.log)"
    names = ", ".join(sorted(name for reply in replies for name in reply))
    return "ok", f"{len(replies)} Celery worker(s): {names}"


Line = tuple[str, str, str]  # service, state, detail


def service_lines(url: str, checks: dict[str, dict[str, str]], worker: tuple[str, str], redis_note: str) -> list[Line]:
    def check(name: str) -> tuple[str, str]:
        probe = checks.get(name, {"status": "unknown", "detail": "not reported by /health/"})
        return probe["status"], probe["detail"]

    # The web server answered the first page; "web" is in the checks only when /health/ failed.
    web = check("web") if "web" in checks else ("ok", f"{url}/  (database: {check('database')[1]})")
    broker_status, broker_detail = check("broker")
    if redis_note and broker_status == "ok":
        broker_detail = f"{broker_detail} ({redis_note})"
    return [
        ("web", *web),
        ("worker", *worker),
        ("LLM", *check("llm")),
        ("Argilla", *check("argilla")),
        ("Redis", broker_status, broker_detail),
    ]


def all_up(lines: list[Line]) -> bool:
    return all(status in {"ok", "eager"} for _, status, _ in lines)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    started = args.since if args.since is not None else time.time()
    url = args.url.rstrip("/")
    deadline = time.monotonic() + args.timeout
    session = requests.Session()
    if not wait_first_page(session, url, deadline):
        print(f"  web      error    {url}/ did not answer within {args.timeout:.0f} s", flush=True)
        return 1
    first_page = time.time() - started
    sign_in(session, url, args.username, args.password)
    while True:
        lines = service_lines(url, health_checks(session, url), worker_state(args.broker_url), args.redis_note)
        done = all_up(lines)
        if done or time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS)
    elapsed = time.time() - started
    state = "all up" if done else "NOT all up"
    print(f"\n  Services ({state} {elapsed:.1f} s after start; first page after {first_page:.1f} s):")
    for name, status, detail in lines:
        print(f"  {name:<8} {status:<8} {detail}")
    print(flush=True)
    if args.watch:
        watch(session, url, args, {name: status for name, status, _ in lines})
    return 0 if done else 1


def watch(session: requests.Session, url: str, args: argparse.Namespace, last: dict[str, str]) -> None:
    """Keep polling and print a line whenever a service changes state (the LLM server crashing
    after start-up, a worker going away), so that "ok" above never stays on screen as a lie."""
    while True:
        time.sleep(args.watch)
        lines = service_lines(url, health_checks(session, url), worker_state(args.broker_url), args.redis_note)
        for name, status, detail in lines:
            if last.get(name) != status:
                print(f"  {time.strftime('%H:%M:%S')} {name:<8} {status:<8} {detail}", flush=True)
                last[name] = status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
