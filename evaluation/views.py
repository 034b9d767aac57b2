from django.contrib import messages
from django.core.exceptions import ImproperlyConfigured
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from annotation.config_export import format_of
from annotation.config_schema import MAX_CONFIG_BYTES
from annotation.models import BenchmarkConfig
from core.errors import ShiftlabError
from core.views import researcher_required
from corpora.models import Dataset
from evaluation.baseline_services import baseline_report_build
from evaluation.benchmark_services import benchmark_run_create_from_config, benchmark_run_create_from_datasets
from evaluation.encoders import encoder_aliases
from evaluation.figures import FIGURES, FORMATS, report_figures
from evaluation.report_robustness import CSV_NAME, JSON_NAME, LATEX_NAME, robustness_report_file, robustness_report_get
from evaluation.reports import benchmark_report
from evaluation.selectors import baseline_study_list, benchmark_run_list


@researcher_required
def benchmark_list_view(request):
    """Benchmark runs, and the form that launches one (a validated config, or datasets only)."""
    if request.method == "POST":
        models = [m.strip() for m in request.POST.get("models", "").replace(",", " ").split() if m.strip()]
        datasets = request.POST.getlist("datasets")
        limit = request.POST.get("limit") or None
        common = {
            "models": models,
            "limit": int(limit) if limit else None,
            "created_by": request.user,
            "name": request.POST.get("name", ""),
        }
        upload = request.FILES.get("config_file")
        try:
            if upload is not None and request.POST.get("config"):
                raise ShiftlabError("choose an exported config or upload a config file, not both")
            if upload is not None:
                run = benchmark_run_create_from_config(
                    text=_uploaded_config_text(upload), fmt=format_of(upload.name), datasets=datasets or None, **common
                )
            elif request.POST.get("config"):
                config = get_object_or_404(BenchmarkConfig, pk=request.POST["config"])
                # The JSON rendering: YAML exported before anchors were refused may hold some.
                run = benchmark_run_create_from_config(
                    text=config.json_text, fmt="json", datasets=datasets or None, **common
                )
            else:
                run = benchmark_run_create_from_datasets(datasets=datasets, **common)
        except (ShiftlabError, ValueError) as exc:
            messages.error(request, str(exc))
        else:
            return redirect("evaluation:benchmark", pk=run.pk)
    return render(
        request,
        "evaluation/benchmark_list.html",
        {
            "runs": benchmark_run_list()[:100],
            "configs": BenchmarkConfig.objects.order_by("-created_at")[:50],
            "datasets": Dataset.objects.order_by("name"),
            "encoders": encoder_aliases(),
        },
    )


def _uploaded_config_text(upload) -> str:
    if upload.size > MAX_CONFIG_BYTES:
        raise ShiftlabError(
            f"{upload.name} has {upload.size} bytes, more than the {MAX_CONFIG_BYTES} a benchmark config may have"
        )
    try:
        return upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise ShiftlabError(f"{upload.name} is not UTF-8 text: upload the file exactly as it was exported") from None


@researcher_required
def benchmark_detail_view(request, pk: int):
    run = get_object_or_404(benchmark_run_list(), pk=pk)
    return render(request, "evaluation/benchmark_detail.html", {"run": run, "report": benchmark_report(run=run)})


@researcher_required
def benchmark_robustness_view(request, pk: int):
    """The robustness report of a run: tables, figures (inline SVG) and export links."""
    run = get_object_or_404(benchmark_run_list(), pk=pk)
    report = robustness_report_get(run=run)
    svgs = report_figures(report)
    figures = [
        {
            "name": name,
            "title": title,
            "unit": unit,
            "svg": _inline(svgs[name]),
            "files": [f"{name}.{fmt}" for fmt in FORMATS],
        }
        for name, (title, unit) in FIGURES.items()
        if name in svgs
    ]
    return render(
        request,
        "evaluation/benchmark_robustness.html",
        {
            "run": run,
            "report": report,
            "figures": figures,
            "exports": [CSV_NAME, JSON_NAME, LATEX_NAME],
        },
    )


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
    run = get_object_or_404(benchmark_run_list(), pk=pk)
    content_type = next((t for suffix, t in EXPORT_TYPES.items() if name.endswith(suffix)), None)
    if content_type is None:
        raise Http404(f"no report file {name!r}")
    content = robustness_report_file(robustness_report_get(run=run), name)
    if content is None:
        raise Http404(f"no report file {name!r}")
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-{name}"'
    return response


@researcher_required
def baseline_list_view(request):
    return render(request, "evaluation/baseline_list.html", {"studies": baseline_study_list()[:200]})


@researcher_required
def baseline_detail_view(request, pk: int):
    """Humans and LLM annotators ranked on a baseline study; models join the ranking when asked
    for (POST "Score models": computed for this response, nothing stored)."""
    study = get_object_or_404(baseline_study_list(), pk=pk)
    models = request.POST.get("models", "").replace(",", " ").split() if request.method == "POST" else []
    report = error = None
    try:
        report = baseline_report_build(study=study, models=models)
    except (ShiftlabError, ImproperlyConfigured) as exc:
        error = str(exc)
        if models:  # show at least the humans when a model could not be scored
            report = _report_or_none(study)
    return render(
        request,
        "evaluation/baseline_detail.html",
        {
            "study": study,
            "report": report,
            "error": error,
            "models": " ".join(models) or (encoder_aliases() or [""])[0],
            "encoders": encoder_aliases(),
        },
    )


def _report_or_none(study):
    try:
        return baseline_report_build(study=study)
    except ShiftlabError:
        return None


def _inline(svg: str) -> str:
    """SVG text without its XML prologue, to embed in the page."""
    return svg[svg.index("<svg") :]
