from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from core.errors import ShiftlabError
from core.plots import csp_safe_svg
from core.views import researcher_required
from evaluation.benchmark_services import benchmark_run_start
from evaluation.figures import FORMATS, figure_titles, report_figures
from evaluation.forms import BenchmarkRunForm
from evaluation.report_robustness import (
    TABLE_NAMES,
    robustness_options,
    robustness_report_file,
    robustness_report_get,
    run_preset,
)
from evaluation.reports import benchmark_report
from evaluation.robustness_options import OPTION_CHOICES, ReportOptionError, ReportOptions
from evaluation.selectors import benchmark_run_list


@researcher_required
@require_http_methods(["GET", "POST"])
def benchmark_list_view(request):
    """The benchmark runs the caller may read, and the form that launches one in a project from an
    approved config (the newest is preselected), an uploaded config, or datasets only
    (``?datasets=NAME`` preselects one). A refusal keeps the input and shows the reason next to the field."""
    initial = {"datasets": request.GET.getlist("datasets"), "config": None} if request.GET.get("datasets") else None
    form = BenchmarkRunForm(request.POST or None, request.FILES or None, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        text, fmt = data["config_file"] or (None, "yaml")
        try:
            run = benchmark_run_start(
                actor=request.user,
                project=data["project"],
                models=data["models"],
                config_id=data["config"].pk if data["config"] else None,
                config_text=text,
                config_format=fmt,
                # by name: the service picks the project's
                datasets=list(dict.fromkeys(d.name for d in data["datasets"])),
                run_anyway=data["run_anyway"],
                limit=data["limit"],
                name=data["name"],
            )
        except ShiftlabError as exc:
            form.add_error(form.refusal_field(exc), str(exc))
        else:
            return redirect("evaluation:benchmark", pk=run.pk)
    runs = benchmark_run_list(user=request.user)[:100]
    return render(request, "evaluation/benchmark_list.html", {"runs": runs, "form": form})


@researcher_required
def benchmark_detail_view(request, pk: int):
    run = get_object_or_404(benchmark_run_list(user=request.user), pk=pk)
    return render(request, "evaluation/benchmark_detail.html", {"run": run, "report": benchmark_report(run=run)})


@researcher_required
def benchmark_robustness_view(request, pk: int):
    """The robustness report of a run: tables, figures (inline SVG) and export links."""
    run = get_object_or_404(benchmark_run_list(user=request.user), pk=pk)
    try:
        options = _report_options(request, run)
    except ReportOptionError as exc:
        messages.error(request, f"{exc}; the report below uses the run's options")
        options = robustness_options(run=run)
    report = robustness_report_get(run=run, options=options)
    svgs = report_figures(report)
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
            "option_fields": [
                {"name": name, "choices": choices, "value": getattr(options, name)}
                for name, choices in OPTION_CHOICES.items()
            ],
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
    try:
        options = _report_options(request, run)
    except ReportOptionError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    content = robustness_report_file(robustness_report_get(run=run, options=options), name)
    if content is None:
        raise Http404(f"no report file {name!r}")
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-{name}"'
    return response


def _inline(svg: str) -> str:
    """SVG text to embed in the page: no XML prologue, and no style attributes or elements, which
    the page's Content-Security-Policy would block (see core.plots)."""
    return csp_safe_svg(svg)
