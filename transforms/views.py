from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from core.views import researcher_required
from transforms.models import TransformRun
from transforms.registry import TRANSFORMATIONS
from transforms.selectors import (
    transform_run_list,
    transform_run_summaries,
    transform_run_summary,
    transformed_item_list,
)


@researcher_required
def run_list_view(request):
    runs = list(transform_run_list()[:100])
    summaries = transform_run_summaries(runs=runs)
    rows = [(run, summaries[run.pk]) for run in runs]
    return render(request, "transforms/run_list.html", {"rows": rows, "transformations": TRANSFORMATIONS.values()})


@researcher_required
def run_detail_view(request, pk: int):
    run = get_object_or_404(TransformRun.objects.select_related("dataset", "generator"), pk=pk)
    failed = request.GET.get("failed")
    outputs = transformed_item_list(run=run, failed=None if failed is None else failed == "1")
    page = Paginator(outputs, 25).get_page(request.GET.get("page"))
    return render(request, "transforms/run_detail.html", {
        "run": run, "summary": transform_run_summary(run=run), "page": page, "failed": failed,
        "spec": TRANSFORMATIONS[run.transformation],
    })  # fmt: skip
