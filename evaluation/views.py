from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.views.decorators.http import require_http_methods

from annotation.models import BenchmarkConfig
from core.pages import refusals
from core.plots import csp_safe_svg
from core.projects import project_can_write, project_require_write, scoped
from core.views import researcher_required
from evaluation.benchmark_execution import BenchmarkRunResumeRequest, benchmark_run_resume
from evaluation.benchmark_services import BenchmarkRunStartRequest, benchmark_run_start
from evaluation.benchmark_sides import has_candidate_lists, unit_side_words
from evaluation.encoder_choices import model_choices
from evaluation.figures import FORMATS, figure_titles
from evaluation.forms import BenchmarkRunForm
from evaluation.hf_export import approval_summary
from evaluation.models import BenchmarkRun
from evaluation.report_robustness import (
    TABLE_NAMES,
    robustness_options,
    robustness_report_file,
    run_preset,
)
from evaluation.report_services import robustness_report_read, robustness_report_store
from evaluation.reports import benchmark_report
from evaluation.robustness_options import OPTION_CHOICES, OPTION_LABELS, VALUE_LABELS, ReportOptions
from evaluation.selectors import (
    benchmark_model_labels,
    benchmark_run_list,
    benchmark_run_transform_runs,
)


@researcher_required
@require_http_methods(["GET", "POST"])
def benchmark_list_view(request):
    """The benchmark runs the caller may read, and the form that launches one in a project from an
    approved config (the newest is preselected), an uploaded config, or datasets only
    (``?datasets=NAME`` preselects one). A refusal keeps the input and shows the reason next to the field."""
    initial = {"datasets": request.GET.getlist("datasets"), "config": None} if request.GET.get("datasets") else None
    if request.GET.get("retry", "").isdigit():
        retried = get_object_or_404(benchmark_run_list(user=request.user), pk=request.GET["retry"])
        initial = _retry_initial(retried, request.user)
    form = BenchmarkRunForm(request.POST or None, request.FILES or None, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        text, fmt = data["config_file"] or (None, "yaml")
        with refusals(request, form):  # on the config given, else on the field the refusal names
            run = benchmark_run_start(
                actor=request.user,
                request=BenchmarkRunStartRequest(
                    project=data["project"],
                    models=data["models"],
                    config_id=data["config"].pk if data["config"] else None,
                    config_text=text,
                    config_format=fmt,
                    datasets=list(dict.fromkeys(d.name for d in data["datasets"])),
                    run_anyway=data["run_anyway"],
                    limit=data["limit"],
                    sides=data["sides"],
                    document_scope=data["document_scope"],
                    name=data["name"],
                ),
            )
            return redirect("evaluation:benchmark", pk=run.pk)
    runs = benchmark_run_list(user=request.user)[:100]
    return render(request, "evaluation/benchmark_list.html", {"runs": runs, "form": form})


def _retry_initial(run: BenchmarkRun, user) -> dict:
    """The launch form filled in as ``run`` was started, to start it again with changes (another
    model, fewer examples): its config when it had one (a config this user can no longer see, or one
    uploaded without registering, leaves the source empty to choose again, never datasets-only), else
    its datasets; its perturbed sides."""
    listed = {c.name for c in model_choices()}
    plan = run.plan or {}
    config = None
    if run.config_hash:
        config = scoped(BenchmarkConfig.objects.filter(config_hash=run.config_hash), user).first()
    return {
        "project": run.project.slug,
        "config": config.pk if config else None,
        "datasets": [] if run.config_hash else plan.get("datasets", []),
        "models": [m for m in run.model_names if m in listed],
        "other_models": " ".join(m for m in run.model_names if m not in listed),
        "limit": run.item_limit,
        "sides": plan.get("sides", []),
        "document_scope": plan.get("document_scope") or "",
        "name": run.name,
    }


@researcher_required
def benchmark_detail_view(request, pk: int):
    """A run: its progress (updated in place while it runs, ``static/live.js``), the generation of
    its transformations, its failures in words with Resume and Retry, and its results."""
    run = get_object_or_404(benchmark_run_list(user=request.user), pk=pk)
    report = benchmark_report(run=run)
    labels = benchmark_model_labels(run=run)
    results = list(report.results)
    for result in results:
        result.model_label = labels.get(result.model, result.model)
        result.side_words = unit_side_words(result.dataset.task_type, result.side) if result.axis else ""
        result.candidate_lists = has_candidate_lists(result.dataset.task_type)
    return render(
        request,
        "evaluation/benchmark_detail.html",
        {
            "run": run,
            "report": report,
            "table": [{**row, "label": labels.get(row["model"], row["model"])} for row in report.table()],
            "results": results,
            "has_sides": any(result.side_words for result in results),
            "models": list(labels.values()),
            "transform_runs": benchmark_run_transform_runs(run=run),
            "can_change": project_can_write(request.user, run.project),
            "finished": run.status in (BenchmarkRun.Status.SUCCEEDED, BenchmarkRun.Status.FAILED),
            "approvals": approval_summary(run.config_document),
        },
    )


@researcher_required
@require_http_methods(["POST"])
def benchmark_resume_view(request, pk: int):
    """Resume: queue again the units that have no result (``benchmark_run_resume``)."""
    run = get_object_or_404(benchmark_run_list(user=request.user), pk=pk)
    with refusals(request):
        run = benchmark_run_resume(actor=request.user, request=BenchmarkRunResumeRequest(run=run.pk))
        left = run.total - run.done
        messages.success(request, f"Resumed: {left} unit{pluralize(left)} without a result queued again.")
    return redirect("evaluation:benchmark", pk=pk)


@researcher_required
@require_http_methods(["GET", "POST"])
def benchmark_robustness_view(request, pk: int):
    """The robustness report of a run: tables, figures (inline SVG) and export links."""
    run = get_object_or_404(benchmark_run_list(user=request.user), pk=pk)
    with refusals(request, show=False) as refused:  # options refused: said, and the run's own used
        options = _report_options(request, run)
    if refused:
        messages.error(request, f"{refused.message}; the report below uses the run's options")
        options = robustness_options(run=run)
    if request.method == "POST":  # compute again, e.g. to count ratings made since
        project_require_write(request.user, run.project)
        robustness_report_store(run=run, options=options)
        return redirect(f"{request.path}?{urlencode(options.as_dict())}")
    report, svgs, stored = robustness_report_read(run=run, options=options)
    figures = [
        {
            "name": name,
            "title": title,
            "unit": unit,
            "svg": _inline(svgs[name]),
            "files": [f"{name}.{fmt}" for fmt in FORMATS],
        }
        for name, (title, unit) in figure_titles(options).items()
        if name in svgs
    ]
    return render(
        request,
        "evaluation/benchmark_robustness.html",
        {
            "run": run,
            "report": report,
            "figures": figures,
            "exports": TABLE_NAMES,
            "options": options,
            "preset": run_preset(run),
            "stored": stored,
            "model_labels": list(benchmark_model_labels(run=run).values()),
            "can_change": project_can_write(request.user, run.project),
            "option_fields": [
                {
                    "name": name,
                    "label": OPTION_LABELS[name],
                    "choices": [(c, VALUE_LABELS.get((name, c), c)) for c in choices],
                    "value": getattr(options, name),
                }
                for name, choices in OPTION_CHOICES.items()
            ],
            "splits_label": OPTION_LABELS["split_half_splits"],
            "options_query": urlencode(options.as_dict()),
            "tau_transformation_unit": options.tau_unit_text("transformation"),
            "tau_axis_unit": options.tau_unit_text("axis"),
            "split_half_unit": options.split_half_text(),
        },
    )


def _report_options(request, run) -> ReportOptions:
    """The robustness report's options (the statistics' units) from the query string, the unset
    ones from the run's preset or the defaults (the paper's protocol)."""
    return robustness_options(run=run, values={name: request.GET.get(name) for name in ReportOptions().as_dict()})


EXPORT_TYPES = {
    ".csv": "text/csv; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".tex": "application/x-tex; charset=utf-8",
    ".svg": "image/svg+xml; charset=utf-8",
    ".png": "image/png",
    ".pdf": "application/pdf",
}


@researcher_required
def benchmark_robustness_export_view(request, pk: int, name: str):
    """One file of the robustness report (CSV, JSON, LaTeX table or a figure), as a download."""
    run = get_object_or_404(benchmark_run_list(user=request.user), pk=pk)
    content_type = next((t for suffix, t in EXPORT_TYPES.items() if name.endswith(suffix)), None)
    if content_type is None:
        raise Http404(f"no report file {name!r}")
    with refusals(request, show=False) as refused:
        options = _report_options(request, run)
    if refused:
        return HttpResponseBadRequest(refused.message, content_type="text/plain; charset=utf-8")
    report, _, _ = robustness_report_read(run=run, options=options)  # the stored report the page shows
    content = robustness_report_file(report, name)
    if content is None:
        raise Http404(f"no report file {name!r}")
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-{name}"'
    return response


def _inline(svg: str) -> str:
    """SVG text to embed in the page: no XML prologue, and no style attributes or elements, which
    the page's Content-Security-Policy would block (see core.plots)."""
    return csp_safe_svg(svg)
