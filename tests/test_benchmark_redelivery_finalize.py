"""A unit delivered again after its worker died between storing the run's last result and
finishing the run: the second delivery finishes the run instead of leaving it running."""

import pytest

from evaluation.benchmark_execution import benchmark_unit_execute
from evaluation.models import BenchmarkResult, BenchmarkRun
from tests.support import benchmark_run_with_results

pytestmark = pytest.mark.django_db


def test_a_unit_delivered_again_after_the_last_result_finishes_the_run():
    run = benchmark_run_with_results()
    stored = BenchmarkResult.objects.filter(run=run)
    # Every result is stored and counted, but the worker died before it finished the run.
    BenchmarkRun.objects.filter(pk=run.pk).update(status="running", total=stored.count(), done=stored.count())
    last = stored.order_by("-pk").first()
    unit = {"model": last.model, "dataset": last.dataset.name, "transformation": last.transformation, "seed": last.seed}

    assert benchmark_unit_execute(run_id=run.pk, unit=unit) is False  # nothing stored twice
    run.refresh_from_db()
    assert (run.status, run.done, run.total) == ("succeeded", stored.count(), stored.count())
