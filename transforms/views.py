from dataclasses import asdict

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from core.pages import refusals
from core.projects import project_can_write
from core.views import researcher_required
from transforms.forms import JudgeEvaluationForm, JudgeRunForm, JudgeSelectionForm, TransformRunForm
from transforms.judge_services import JudgeReportCreateRequest, judge_report_create
from transforms.judge_tables import format_value, judge_models, report_tables, report_warnings
from transforms.models import JudgeReport, TransformRun
from transforms.plots import edit_distance_histogram, judge_score_figures
from transforms.registry import TRANSFORMATIONS
from transforms.selectors import (
    judge_report_list,
    transform_run_edit_distances,
    transform_run_list,
    transform_run_summaries,
    transform_run_summary,
    transformed_item_list,
)
from transforms.sensitivity_services import prompt_sensitivity_report
from transforms.sensitivity_tables import sensitivity_figure, sensitivity_tables
from transforms.serializers import JudgeReportCreateSerializer
from transforms.services import (
    TransformRunResumeRequest,
    TransformRunsStartRequest,
    transform_run_resume,
    transform_runs_start,
)


@researcher_required
@require_http_methods(["GET", "POST"])
def run_list_view(request):
    """Runs, and the form that starts one (``?dataset=NAME`` preselects a dataset): the same
    settings and services as ``POST /api/transform-runs/``; a refusal keeps the input."""
    dataset = request.GET.get("dataset", "")
    form = TransformRunForm(request.POST or None, user=request.user, initial={"dataset": dataset} if dataset else None)
    if request.method == "POST" and form.is_valid():
        with refusals(request, form):
            asked = TransformRunsStartRequest(project=form.cleaned_data["project"], **form.service_data())
            runs = transform_runs_start(actor=request.user, request=asked)
            listed = ", ".join(f"#{run.pk}" for run in runs)
            messages.success(request, f"Started run{'s' if len(runs) > 1 else ''} {listed}.")
            return redirect("transforms:run", pk=runs[0].pk) if len(runs) == 1 else redirect("transforms:runs")
    runs = list(transform_run_list(user=request.user)[:100])
    summaries = transform_run_summaries(runs=runs)
    rows = [(run, summaries[run.pk]) for run in runs]
    return render(
        request,
        "transforms/run_list.html",
        {"rows": rows, "transformations": TRANSFORMATIONS.values(), "form": form},
    )


@researcher_required
@require_http_methods(["GET", "POST"])
def run_detail_view(request, pk: int):
    """A run's outcome and examples; POST resumes a failed or unfinished run (the texts without
    an outcome are queued again; finished texts and cached generations are reused)."""
    run = get_object_or_404(transform_run_list(user=request.user), pk=pk)
    if request.method == "POST":
        if not run_resumable(run):
            messages.error(
                request, f"Run #{run.pk} is {run.status} with {run.done}/{run.total} texts: nothing to resume."
            )
        else:
            with refusals(request):  # one the caller may only read: 403
                run = transform_run_resume(actor=request.user, request=TransformRunResumeRequest(run=run.pk))
                messages.success(request, f"Resumed run #{run.pk}: {run.total - run.done} texts queued again.")
        return redirect("transforms:run", pk=run.pk)
    failed = request.GET.get("failed")
    outputs = transformed_item_list(run=run, failed=None if failed is None else failed == "1")
    page = Paginator(outputs, 25).get_page(request.GET.get("page"))
    distances = transform_run_edit_distances(run=run)
    return render(
        request,
        "transforms/run_detail.html",
        {
            "run": run,
            "summary": transform_run_summary(run=run),
            "page": page,
            "failed": failed,
            "spec": TRANSFORMATIONS[run.transformation],
            "resumable": run_resumable(run) and project_can_write(request.user, run.project),
            "edit_figure": edit_distance_histogram(distances) if distances else "",
        },
    )


def run_resumable(run: TransformRun) -> bool:
    """A run worth resuming: failed, or finished with texts that have no outcome yet."""
    unfinished = run.status in (TransformRun.Status.PENDING, TransformRun.Status.RUNNING)
    return run.status == TransformRun.Status.FAILED or (not unfinished and run.done < run.total)


# Per report kind: the page's context name, the form and its id prefix (three forms on one page).
JUDGE_FORMS = {
    JudgeReport.Kind.EVALUATION: ("evaluation_form", JudgeEvaluationForm, "ev-%s"),
    JudgeReport.Kind.RUN: ("run_form", JudgeRunForm, "run-%s"),
    JudgeReport.Kind.SELECTION: ("selection_form", JudgeSelectionForm, "sel-%s"),
}


@researcher_required
@require_http_methods(["GET", "POST"])
def judge_report_list_view(request):
    """Judge reports, and a form that queues a new one of each kind (the body of
    ``POST /api/judge-reports/``, checked by its serializer); a refusal keeps the input."""
    forms_by_name = {name: form_class(auto_id=ids, user=request.user) for name, form_class, ids in JUDGE_FORMS.values()}
    posted = JUDGE_FORMS.get(request.POST.get("kind", "")) if request.method == "POST" else None
    if request.method == "POST" and posted is None:
        messages.error(request, "Choose one of the three forms below.")
    if posted is not None:
        name, form_class, ids = posted
        form = forms_by_name[name] = form_class(request.POST, auto_id=ids, user=request.user)
        if form.is_valid():
            data_in = JudgeReportCreateSerializer(data=form.service_data())
            if not data_in.is_valid():
                for field, errors in data_in.errors.items():
                    form.add_error(field if field in form.fields else None, " ".join(map(str, errors)))
            else:
                with refusals(request, form):
                    asked = JudgeReportCreateRequest(**data_in.validated_data)
                    report = judge_report_create(actor=request.user, request=asked)
                    return redirect("transforms:judge-report", pk=report.pk)
    return render(
        request,
        "transforms/judge_list.html",
        {"reports": [(r, _judge_models(r)) for r in judge_report_list(user=request.user)[:100]], **forms_by_name},
    )


@researcher_required
def judge_report_detail_view(request, pk: int):
    report = get_object_or_404(judge_report_list(user=request.user), pk=pk)
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
            "figures": judge_score_figures(report.result, _judge_models(report)) if report.result else [],
        },
    )


def _judge_models(report: JudgeReport) -> dict[str, str]:
    """The judges' models as the report stored them; before it has a result, none (the page then
    shows the models the aliases are configured with)."""
    return judge_models(report.kind, report.result) if report.result is not None else {}


@researcher_required
def prompt_sensitivity_view(request):
    """The prompt-sensitivity report of the runs named in ``?runs=3,4,5`` (one transformation of
    the same texts under several prompt versions); a refusal says which run differs and how."""
    raw = request.GET.get("runs", "")
    context = {"runs": raw, "tables": [], "figure": "", "error": "", "result": None}
    if raw:
        try:
            run_ids = [int(part) for part in raw.replace(" ", ",").split(",") if part]
        except ValueError:
            context["error"] = f"runs must be run ids separated by commas, e.g. 3,4,5 (got {raw!r})"
        else:
            with refusals(request, show=False) as refused:  # said on the page: which run differs and how
                result = prompt_sensitivity_report(run_ids=run_ids, user=request.user)
                stored = asdict(result)
                tables = sensitivity_tables(stored)
                context |= {
                    "result": result,
                    "tables": [(t, [[format_value(v) for v in row] for row in t.rows]) for t in tables],
                    "figure": sensitivity_figure(stored),
                }
            context["error"] = refused.message
    return render(request, "transforms/sensitivity.html", context)
