"""Pages speak the one vocabulary (issue 42): the main pages, rendered with real rows, show no code
name from the registries (audit verbs, ``llm:``/``axis:`` forms, parameter keys and language
plans with underscores, report option values, metric keys) outside a ``<code>`` hint."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from core import vocabulary
from core.services import audit_record
from tests.support import benchmark_run_with_results, published_keyword_study
from tests.test_human_baseline_report import sts_study  # noqa: F401 (a fixture)
from transforms.registry import TRANSFORMATIONS, LanguagePlan

pytestmark = pytest.mark.django_db

# Text inside these elements is not read as prose: a <code> hint is where a script user finds
# the code name; scripts and styles are not shown.
SKIPPED = {"code", "script", "style", "pre", "textarea"}


class _Prose(HTMLParser):
    def __init__(self):
        super().__init__()
        self.depth = 0
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.depth += tag in SKIPPED

    def handle_endtag(self, tag):
        self.depth -= tag in SKIPPED and self.depth > 0

    def handle_data(self, data):
        if not self.depth:
            self.text.append(data)


def prose(html: str) -> str:
    """What a page says: its text outside tags, attributes and <code> hints."""
    parser = _Prose()
    parser.feed(html)
    return " ".join(" ".join(parser.text).split())


def code_names() -> set[str]:
    names = set(vocabulary.AUDIT_VERBS) | {"model_mean", "per_model"}
    names |= {p.value for p in LanguagePlan if "_" in p.value}
    names |= {key for key in vocabulary.PARAMETERS if "_" in key}
    names |= {key for key in vocabulary.METRICS if "_" in key} | {"cosine_spearman", "ndcg_at_10", "map_at_1000"}
    names |= {name for name in TRANSFORMATIONS if "_" in name}
    names |= {key for key in (*vocabulary.FLAG_RULES, *vocabulary.REJECTION_REASONS) if "_" in key}
    return names


FORMS = re.compile(r"\b(?:llm|axis|transformation):[a-z_]+")


def code_names_in(text: str) -> list[str]:
    found = [name for name in code_names() if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text)]
    return sorted(found + FORMS.findall(text))


@pytest.fixture
def study(researcher):
    study = published_keyword_study(researcher=researcher, name="vocab", limit=4, items=4, batch_size=4)
    for verb in ("annotator.roster.add", "dataset.import", "study.publish", "study.transformation.approve"):
        audit_record(actor=researcher, verb=verb, obj=study)
    return study


def test_the_main_pages_show_no_code_name_outside_a_code_hint(client, researcher, study):
    benchmark = benchmark_run_with_results()
    client.force_login(researcher)
    pages = {
        "home": reverse("home"),
        "audit log": reverse("audit-log"),
        "studies": reverse("annotation:studies"),
        "study": reverse("annotation:study", args=[study.pk]),
        "gate": reverse("annotation:gate", args=[study.pk]),
        "annotators": reverse("annotation:annotators", args=[study.pk]),
        "review queue": reverse("annotation:review", args=[study.pk]),
        "publish": reverse("annotation:publish", args=[study.pk]),
        "exports": reverse("annotation:exports"),
        "judge reports": reverse("transforms:judge-reports"),
        "benchmarks": reverse("evaluation:benchmarks"),
        "baselines": reverse("evaluation:baselines"),
        "projects": reverse("projects"),
        "runs": reverse("transforms:runs"),
        "run": reverse("transforms:run", args=[study.runs.get().pk]),
        "datasets": reverse("corpora:list"),
        "dataset": reverse("corpora:detail", args=["demo-sts"]),
        "benchmark": reverse("evaluation:benchmark", args=[benchmark.pk]),
        "robustness report": reverse("evaluation:robustness", args=[benchmark.pk]),
    }
    found = {}
    for title, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, title
        names = code_names_in(prose(response.content.decode()))
        if names:
            found[title] = names
    assert found == {}


def test_recent_decisions_read_as_what_happened(client, researcher, study):
    client.force_login(researcher)
    home = prose(client.get(reverse("home")).content.decode())
    assert "added an annotator to the roster" in home and "imported a dataset" in home
    assert "approved a transformation" in home


def test_the_study_page_names_runs_and_agreement_groups_in_words(client, researcher, study):
    client.force_login(researcher)
    page = prose(client.get(reverse("annotation:study", args=[study.pk])).content.decode())
    run = study.runs.get()
    assert f"Random keywords of demo-sts (run {run.pk}, seed {run.seed})" in page
    assert "Extra (keywords) axis" in page and "Overall" in page


def test_the_transformations_table_keeps_the_name_scripts_use_in_a_code_hint(client, researcher):
    client.force_login(researcher)
    html = client.get(reverse("transforms:runs")).content.decode()
    assert "Backtranslation <code>backtranslation</code>" in html
    assert "Summarised expansion <code>summarized_expansion</code>" in html
    text = prose(html)
    assert "a pivot language per text, then back to the source" in text and "Lexical/stylistic" in text


def test_a_baseline_report_names_its_llm_rater_task_and_metric_in_words(client, researcher, request):
    baseline = request.getfixturevalue("sts_study")  # answers of three people and of the LLM "qwen"
    client.force_login(researcher)
    page = prose(client.get(reverse("evaluation:baseline", args=[baseline.pk])).content.decode())
    assert "the LLM “qwen”" in page and "Semantic textual similarity (STS), scored by Spearman correlation" in page
    assert code_names_in(page) == []
