"""The meaning-changing rewrites of the sensitivity axis run on the embedded LLM (SmolLM2 on
llama.cpp): each is a transformation run like any other, its outputs pass through the error checks
and nothing failed is replaced by its source. SmolLM2 is a poor editor: this checks the machinery,
not whether the meaning changed (that is what the inverse human study is for)."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings

from corpora.services import dataset_import
from transforms.error_checks import ErrorType
from transforms.models import TransformedItem
from transforms.params import GenerationParams
from transforms.registry import MEANING_CHANGES
from transforms.services import transform_run_create
from transforms.tasks import start_run

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_every_meaning_change_runs_on_the_embedded_llm(llm_backend):
    sts = dataset_import(
        source=django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts-meaning"
    )
    kept_in_all = 0
    for name, _, _ in MEANING_CHANGES:
        run = transform_run_create(
            dataset=sts,
            transformation=name,
            seed=5,
            limit=2,
            dispatch=False,
            params=GenerationParams(temperature=0.7, max_tokens=64, max_attempts=2),
        )
        start_run.delay(run.pk)
        run.refresh_from_db()
        assert run.status == "succeeded", (name, run.status)
        outputs = list(TransformedItem.objects.filter(run=run))
        assert len(outputs) == 4  # two pairs, both sides
        known = {e.value for e in ErrorType}
        for t in outputs:
            assert t.attempts >= 1
            if t.ok:
                assert t.output_text.strip() and t.output_text.strip() != t.source_text.strip()
            else:
                assert t.error_type in known
            assert set(t.attempt_errors) <= known | {""}
        kept = [(t.source_text, t.output_text) for t in outputs if t.ok]
        kept_in_all += len(kept)
        print(f"\n{name}: {len(kept)} of {len(outputs)} ok, errors {[t.error_type for t in outputs if not t.ok]}")
        for source, output in kept[:2]:
            print(f"  {source!r} -> {output!r}")
    # Not only that the checks run: the prompts must get some usable rewrite out of the small model
    # (9 of 16 were kept when these prompts were written).
    assert kept_in_all >= 1
