"""The config's safe reader and typed form: every malformed document is a ConfigError naming the
bad field's path, never a KeyError, and nothing in a YAML file is expanded."""

import copy
import json

import pytest

from annotation.configs.config_export import config_render, config_seal
from annotation.configs.config_schema import MAX_CONFIG_BYTES, SCHEMA, ConfigError, PerturbationEntry, config_read
from annotation.configs.config_text import config_load
from tests.support import minimal_config_body

KEY = "a-test-signing-key"


def sealed() -> dict:
    return config_seal(minimal_config_body(), key=KEY)


def test_an_export_reads_into_its_typed_form():
    config = config_read(config_load(config_render(sealed(), "yaml"), "yaml"))
    [entry] = config.approved
    assert entry.runs[0].seed == 1 and entry.runs[0].prompt_hashes == {"paraphrase": "p" * 64}
    assert config.schema == SCHEMA and config.signature is not None and config.datasets[0].name == "demo-sts"


def _edit(path: str, value=None, *, delete: bool = False):
    def apply(document):
        *parents, last = (int(part) if part.isdigit() else part for part in path.split("."))
        node = document
        for part in parents:
            node = node[part]
        if delete:
            del node[last]
        else:
            node[last] = value

    return apply


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            _edit("transformations.0.runs.0.generator.hash", delete=True),
            "transformations[0].runs[0].generator.hash: missing",
        ),
        (
            _edit("transformations.0.runs.0.seed", "1"),
            "transformations[0].runs[0].seed: expected an integer, got a string",
        ),
        (
            _edit("transformations.0.runs.0.seed", True),
            "transformations[0].runs[0].seed: expected an integer, got a boolean",
        ),
        (
            _edit("transformations.0.runs.0.seed", 1.5),
            "transformations[0].runs[0].seed: expected an integer, got a number",
        ),
        (_edit("transformations.0.runs", []), "transformations[0].runs: must not be empty"),
        (_edit("transformations.0.runs.0", "x"), "transformations[0].runs[0]: expected a mapping, got a string"),
        (_edit("transformations", []), "transformations: must not be empty"),
        (_edit("transformations", {}), "transformations: expected a list, got a mapping"),
        (
            _edit("transformations.0.approval.decision", "maybe"),
            "transformations[0].approval.decision: expected 'approve'",
        ),
        (_edit("transformations.0.gate.passed", "yes"), "transformations[0].gate.passed: expected true or false"),
        (
            _edit("transformations.0.gate.single_rater_pilot", True),
            "transformations[0].gate.single_rater_pilot: must be true exactly when the gate's evidence records a "
            "single-rater pilot (evidence says false)",
        ),
        (
            _edit("transformations.0.gate.evidence.single_rater_pilot", True),
            "transformations[0].gate.single_rater_pilot: must be true exactly when the gate's evidence records a "
            "single-rater pilot (evidence says true)",
        ),
        (
            _edit("transformations.0.gate.single_rater_pilot", "yes"),
            "transformations[0].gate.single_rater_pilot: expected true or false",
        ),
        (
            _edit("transformations.0.runs.0.target_languages", ["en", 3]),
            "transformations[0].runs[0].target_languages[1]",
        ),
        (_edit("datasets.0", {"name": "x"}), "datasets[0].content_hash: missing"),
        (
            _edit("schema", "shiftlab.benchmark-config/2"),
            "schema: 'shiftlab.benchmark-config/2' is not a config format",
        ),
        (_edit("schema", delete=True), "schema: missing"),
        (
            _edit("transformations.0.runs.0.sead", 1),
            "transformations[0].runs[0].sead: not a field of this config format",
        ),
        (_edit("config_hash", "abc"), "config_hash: expected a sha256 hex digest"),
        (_edit("signature.algorithm", "md5"), "signature.algorithm: 'md5' is not supported"),
        (_edit("signature.value", 5), "signature.value: expected a string"),
    ],
)
def test_malformed_documents_name_the_bad_field(edit, message):
    document = copy.deepcopy(sealed())
    edit(document)
    with pytest.raises(ConfigError) as raised:
        config_read(document)
    assert str(raised.value).startswith(message), str(raised.value)


@pytest.mark.parametrize(
    ("text", "fmt", "message"),
    [
        ("[1, 2]", "json", "the file holds a list, not a benchmark config mapping"),
        ('"x"', "json", "the file holds a string"),
        ("- a\n", "yaml", "the file holds a list"),
        ("", "yaml", "the file holds null"),
        ('{"a": 1, "a": 2}', "json", "duplicate key 'a'"),
        ("a: 1\na: 2\n", "yaml", "duplicate key 'a'"),
        ('{"a": NaN}', "json", "NaN is not a number"),
        ("a: .nan\n", "yaml", "a: NaN and infinite numbers are not allowed"),
        ("at: 2026-01-01\n", "yaml", "at: a date is not JSON data"),
        ("a: !!binary aGk=\n", "yaml", "a: a bytes is not JSON data"),
        ("? [1]\n: x\n", "yaml", "does not parse as yaml"),
        ("1: x\n", "yaml", "keys must be strings"),
        ("a: &x 1\nb: *x\n", "yaml", "YAML anchors and aliases"),
        ("b: &x {c: 1}\na:\n  <<: *x\n", "yaml", "YAML anchors and aliases"),
        ("a:\n  <<: {c: 1}\n", "yaml", "YAML merge keys"),
        ('{"a": "\\ud800"}', "json", "a: holds an unpaired surrogate"),
        ('{"\\udfff": 1}', "json", "holds an unpaired surrogate"),
        ("{", "json", "does not parse as json"),
        ("a: [", "yaml", "does not parse as yaml"),
        ("[" * 100_000 + "]" * 100_000, "json", "nested too deeply"),
        ('{"a":' * 70 + "1" + "}" * 70, "json", "nested too deeply"),
    ],
)
def test_unsafe_or_malformed_text_is_refused_before_use(text, fmt, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("?", r"\?")):
        config_load(text, fmt)


def test_a_yaml_alias_bomb_is_refused_without_expanding_it():
    # Nine levels of nine aliases: about 387 million strings once expanded.
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, 10):
        lines.append(f"a{n}: &a{n} [" + ",".join([f"*a{n - 1}"] * 9) + "]")
    with pytest.raises(ConfigError, match=r"YAML anchors and aliases \(&/\*\) are not allowed \(line 1"):
        config_load("\n".join(lines) + "\n", "yaml")


def test_size_is_capped_before_parsing():
    text = json.dumps({"padding": "x" * MAX_CONFIG_BYTES})
    with pytest.raises(ConfigError, match=f"more than the {MAX_CONFIG_BYTES}"):
        config_load(text, "json")


def test_a_single_rater_pilot_gate_reads_with_its_mark():
    document = copy.deepcopy(sealed())
    gate = document["transformations"][0]["gate"]
    gate["evidence"] = {**gate["evidence"], "single_rater_pilot": True}
    gate["single_rater_pilot"] = True
    assert config_read(document).transformations[0].gate.single_rater_pilot is True
    assert config_read(sealed()).transformations[0].gate.single_rater_pilot is False


def test_a_perturbation_block_reads_and_each_bad_field_is_named():
    body = {**minimal_config_body(), "perturbation": {"sides": ["document", "both"], "document_scope": "documents"}}
    config = config_read(config_load(config_render(config_seal(body, key=KEY), "json"), "json"))
    assert config.perturbation == PerturbationEntry(sides=("document", "both"), document_scope="documents")
    assert config_read(sealed()).perturbation is None  # a config without it leaves the sides to the run
    bad = {
        "perturbation.sides: must not be empty": {"sides": [], "document_scope": "documents"},
        "perturbation.sides[1]: 'corpus' is not a side: choose among query, document, both": {
            "sides": ["query", "corpus"],
            "document_scope": "documents",
        },
        "perturbation.sides[1]: 'query' is listed twice": {"sides": ["query", "query"], "document_scope": "documents"},
        "perturbation.document_scope: expected 'relevant_documents' or 'documents', got 'all'": {
            "sides": ["query"],
            "document_scope": "all",
        },
        "perturbation.document_scope: missing": {"sides": ["query"]},
        "perturbation.seeds: not a field of this config format": {
            "sides": ["query"],
            "document_scope": "documents",
            "seeds": [1],
        },
        "perturbation: expected a mapping, got a list": ["query"],
    }
    for message, block in bad.items():
        with pytest.raises(ConfigError) as refused:
            config_read(config_seal({**minimal_config_body(), "perturbation": block}, key=KEY))
        assert str(refused.value) == message
