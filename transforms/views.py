from django.contrib import messages
from django.core.exceptions import ImproperlyConfigured
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render

from core.errors import ShiftlabError
from core.views import researcher_required
from corpora.models import Dataset
from corpora.task_types import TaskType
from transforms.backends import backend_aliases
from transforms.judge_services import judge_report_create
from transforms.judge_tables import format_value, judge_models, report_tables, report_warnings
from transforms.models import JudgeReport, TransformRun
from transforms.registry import TRANSFORMATIONS
from transforms.selectors import (
    judge_report_list,
    transform_run_list,
    transform_run_summaries,
    transform_run_summary,
    transformed_item_list,
)
from transforms.serializers import JudgeReportCreateSerializer


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
    return render(
        request,
        "transforms/run_detail.html",
        {
            "run": run,
            "summary": transform_run_summary(run=run),
            "page": page,
            "failed": failed,
            "spec": TRANSFORMATIONS[run.transformation],
        },
    )


@researcher_required
def judge_report_list_view(request):
    """Judge reports, and forms that queue a new one of each kind."""
    if request.method == "POST":
        data_in = JudgeReportCreateSerializer(data=request.POST)
        if data_in.is_valid():
            try:
                report = judge_report_create(created_by=request.user, **data_in.validated_data)
            except (ShiftlabError, ImproperlyConfigured) as exc:
                messages.error(request, str(exc))
            else:
                return redirect("transforms:judge-report", pk=report.pk)
        else:
            messages.error(
                request, "; ".join(f"{field}: {' '.join(map(str, errors))}" for field, errors in data_in.errors.items())
            )
    return render(
        request,
        "transforms/judge_list.html",
        {
            "reports": [(r, _judge_models(r)) for r in judge_report_list()[:100]],
            "sts_datasets": Dataset.objects.filter(task_type__in=[TaskType.STS, TaskType.STR]).order_by("name"),
            "datasets": Dataset.objects.order_by("name"),
            "runs": transform_run_list().filter(status=TransformRun.Status.SUCCEEDED).order_by("-pk")[:200],
            "backends": backend_aliases(),
            "transformations": [t for t in TRANSFORMATIONS.values() if t.uses_llm],
        },
    )


@researcher_required
def judge_report_detail_view(request, pk: int):
    report = get_object_or_404(judge_report_list(), pk=pk)
    tables = report_tables(report.kind, report.result) if report.result is not None else []
    formatted = [(table, [[format_value(v) for v in row] for row in table.rows]) for table in tables]
    return render(
        request,
        "transforms/judge_detail.html",
        {
            "report": report,
            "tables": formatted,
            "judge_models": _judge_models(report),
            "warnings": report_warnings(report.kind, report.result) if report.result is not None else [],
        },
    )


def _judge_models(report: JudgeReport) -> dict[str, str]:
    """The judges' models as the report stored them; before it has a result, none (the page then
    shows the models the aliases are configured with)."""
    return judge_models(report.kind, report.result) if report.result is not None else {}
