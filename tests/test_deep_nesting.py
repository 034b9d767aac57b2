"""No input crashes a process (issue 27, finding 8): a config, a control pool or a dataset nested
50,000 levels deep is refused with a clear message before any recursive parser reads it.

libyaml's composer recurses in C, so the old code died with SIGSEGV (exit 139) rather than raise:
each input here is read in a forked child (or a subprocess for the command), so that a crash shows
as a failed test naming the signal instead of a dead pytest."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from annotation.export_services import benchmark_config_verify
from annotation.studies.control_pool import control_pool_from_upload
from corpora.parsing import DatasetFormatError
from corpora.readers import read_table
from tests.support import api_as, page_as

DEEP = "nested too deeply"
MAX_NESTING = 64  # core.nesting.MAX_NESTING
FUZZ = hypothesis_settings(
    max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


def in_child(work: Callable[[], object]) -> object:
    """``work()`` in a forked child: its result, or ``("raised", text)``; a child killed by a signal
    fails the test."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read_end)
        try:
            payload = ("ok", work())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent as a result
            payload = ("raised", f"{type(exc).__name__}: {exc}"[:2000])
        with os.fdopen(write_end, "wb") as out:
            pickle.dump(payload, out)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as incoming:
        data = incoming.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        signal = os.WTERMSIG(status)
        pytest.fail(f"the process died with signal {signal} (exit status {128 + signal}) reading the input")
    return pickle.loads(data)


def flow(depth: int, fmt: str) -> str:
    """The finding's file: a config whose only field holds ``depth`` nested lists (100 KB at 50,000)."""
    inner = "[" * depth + "]" * depth
    return f"name: {inner}\n" if fmt == "yaml" else f'{{"name": {inner}}}'


@st.composite
def deep_text(draw, fmt: str) -> str:
    """Nested deeper than the limit: flow lists and mappings mixed (any depth up to 50,000), or
    YAML block nesting (indentation grows, so at most 1,500), after an ordinary field or two."""
    style = draw(st.sampled_from(["flow", "block"] if fmt == "yaml" else ["flow"]))
    lead = draw(st.sampled_from(["", "schema: x\n" if fmt == "yaml" else ""]))
    if style == "block":
        depth = draw(st.integers(MAX_NESTING + 1, 1_500))
        keyed = draw(st.booleans())
        lines = [" " * n + (f"k{n}:" if keyed else "-") for n in range(depth)]
        return lead + "root:\n" + "\n".join(" " + line for line in lines) + " 1\n"
    depth = draw(st.integers(MAX_NESTING + 1, 50_000))
    opens = draw(st.lists(st.sampled_from(["[", '{"k": ']), min_size=1, max_size=3))
    closes = {"[": "]", '{"k": ': "}"}
    chain = [opens[n % len(opens)] for n in range(depth)]
    body = "".join(chain) + "1" + "".join(closes[o] for o in reversed(chain))
    if fmt == "yaml":
        return f"{lead}name: {body}\n"
    return f'{{"name": {body}}}'


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_fuzzed_deep_configs_are_refused_with_a_message_not_a_crash(fmt):
    """The reader behind the command, the API and the upload form (``benchmark_config_verify``)."""

    @FUZZ
    @given(text=deep_text(fmt))
    def every_input_is_refused(text):
        check = benchmark_config_verify(text=text, fmt=fmt)
        assert not check.ok and not check.accepted
        assert any(DEEP in problem for problem in check.verification.problems), check.verification.problems

    assert in_child(every_input_is_refused) == ("ok", None)


def test_the_finding_a_100_kb_yaml_config_50000_deep_through_the_command(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text(flow(50_000, "yaml"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "manage.py", "benchmark_config", "verify", str(path)],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "shiftlab.settings"},
    )
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert DEEP in done.stderr and "does not verify" in done.stderr


@pytest.mark.django_db
def test_the_api_and_the_upload_form_refuse_a_deep_config(researcher):
    text = flow(50_000, "yaml")
    api_client, page_client = api_as(researcher), page_as(researcher)  # logged in here: the child only reads

    def post_both():
        api = api_client.post("/api/benchmark-configs/verify/", {"text": text, "format": "yaml"}, format="json")
        page = page_client.post(
            "/benchmarks/",
            {"config_file": SimpleUploadedFile("deep.yaml", text.encode()), "models": "m"},
        )
        return api.status_code, api.json(), page.status_code, page.content.decode()

    outcome, result = in_child(post_both)
    assert outcome == "ok", result
    api_status, api_body, page_status, page_text = result
    assert api_status == 200 and api_body["accepted"] is False and DEEP in " ".join(api_body["problems"])
    assert page_status == 200 and DEEP in page_text


@pytest.mark.django_db
def test_a_deep_json_api_body_is_a_400_naming_the_nesting(researcher):
    body = '{"text": "x", "format": "json", "extra": ' + "[" * 50_000 + "]" * 50_000 + "}"
    client = api_as(researcher)

    def post():
        answer = client.post("/api/benchmark-configs/verify/", body, content_type="application/json")
        return answer.status_code, answer.content.decode()[:500]

    outcome, result = in_child(post)
    assert outcome == "ok", result
    assert result[0] == 400 and DEEP in result[1], result


@st.composite
def deep_jsonl(draw) -> bytes:
    depth = draw(st.integers(MAX_NESTING + 1, 50_000))
    good = json.dumps({"text_a": "A cat sat.", "text_b": "A dog ran far.", "kind": "easy_negative"})
    deep = '{"text_a": "x", "text_b": ' + "[" * depth + "]" * depth + ', "kind": "easy_negative"}'
    lines = [good, deep] if draw(st.booleans()) else [deep, good]
    return ("\n".join(lines) + "\n").encode()


def test_fuzzed_deep_uploads_are_refused_with_their_line(tmp_path):
    """A control pool upload and a dataset file (JSON Lines) with a row nested too deeply."""

    @FUZZ
    @given(data=deep_jsonl())
    def every_upload_is_refused(data):
        with pytest.raises(DatasetFormatError) as pool:
            control_pool_from_upload(SimpleUploadedFile("pool.jsonl", data))
        path = tmp_path / "rows.jsonl"
        path.write_bytes(data)
        with pytest.raises(DatasetFormatError) as dataset:
            read_table(path, fmt="jsonl")
        for raised in (pool, dataset):
            assert DEEP in str(raised.value) and any(p.line in (1, 2) for p in raised.value.problems)

    assert in_child(every_upload_is_refused) == ("ok", None)


def test_nesting_check_counts_only_structure():
    from core.nesting import NestingError, nesting_check

    nesting_check('{"a": "' + "[" * 500 + '"}', "json")  # brackets in a string do not nest
    nesting_check("a: '" + "[" * 500 + "'\n", "yaml")
    nesting_check("a: " + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1), "yaml")  # the mapping is a level
    with pytest.raises(NestingError, match="line 3"):
        nesting_check("a: 1\nb: 2\nc: " + "[" * (MAX_NESTING + 1), "yaml")
    with pytest.raises(NestingError):
        nesting_check("[" * (MAX_NESTING + 1), "json")


def test_a_deep_json_option_of_a_command_is_a_command_error():
    from django.core.management import CommandError

    from annotation.management.commands.study import Command

    with pytest.raises(CommandError, match="--design is not valid JSON: .*nest"):
        Command._design_fields("[" * 50_000 + "]" * 50_000)
