from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render

from annotation.models import BenchmarkConfig
from core.errors import ShiftlabError
from core.views import researcher_required
from datasets.models import Dataset
from evaluation.benchmark_services import benchmark_run_create_from_config, benchmark_run_create_from_datasets
from evaluation.encoders import encoder_aliases
from evaluation.reports import benchmark_report
from evaluation.selectors import benchmark_run_list


@researcher_required
def benchmark_list_view(request):
    """Benchmark runs, and the form that launches one (a validated config, or datasets only)."""
    if request.method == "POST":
        models = [m.strip() for m in request.POST.get("models", "").replace(",", " ").split() if m.strip()]
        datasets = request.POST.getlist("datasets")
        limit = request.POST.get("limit") or None
        common = {"models": models, "limit": int(limit) if limit else None, "created_by": request.user,
                  "name": request.POST.get("name", "")}  # fmt: skip
        try:
            if request.POST.get("config"):
                config = get_object_or_404(BenchmarkConfig, pk=request.POST["config"])
                run = benchmark_run_create_from_config(text=config.yaml_text, fmt="yaml", datasets=datasets or None,
                                                       **common)  # fmt: skip
            else:
                run = benchmark_run_create_from_datasets(datasets=datasets, **common)
        except (ShiftlabError, ValueError) as exc:
            messages.error(request, str(exc))
        else:
            return redirect("evaluation:benchmark", pk=run.pk)
    return render(request, "evaluation/benchmark_list.html", {
        "runs": benchmark_run_list()[:100],
        "configs": BenchmarkConfig.objects.order_by("-created_at")[:50],
        "datasets": Dataset.objects.order_by("name"),
        "encoders": encoder_aliases(),
    })  # fmt: skip


@researcher_required
def benchmark_detail_view(request, pk: int):
    run = get_object_or_404(benchmark_run_list(), pk=pk)
    return render(request, "evaluation/benchmark_detail.html", {"run": run, "report": benchmark_report(run=run)})
