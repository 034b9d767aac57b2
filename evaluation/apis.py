import json

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from annotation.models import BenchmarkConfig
from core.apis import project_for_new_or_400
from core.errors import ShiftlabError
from core.permissions import IsResearcher
from core.projects import ProjectAccessError, project_require_write, scoped
from evaluation.benchmark_services import (
    benchmark_run_create_from_config,
    benchmark_run_create_from_datasets,
    benchmark_run_resume,
)
from evaluation.report_robustness import JSON_NAME, robustness_options, robustness_report_files, robustness_report_get
from evaluation.reports import benchmark_report
from evaluation.robustness import ReportOptionError
from evaluation.selectors import benchmark_result_list, benchmark_run_list
from evaluation.serializers import (
    BenchmarkResultSerializer,
    BenchmarkRunCreateSerializer,
    BenchmarkRunSerializer,
    RobustnessOptionsSerializer,
)
from transforms.presets import resolve_preset


class BenchmarkRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Benchmark runs: POST starts one (from a validated config or, original data only, from
    datasets) in ``project`` (default: the caller's own project); `results` lists every unit,
    `report` adds the aggregates; `resume` re-queues units without a result. Runs of projects the
    caller does not belong to are not found (404); a viewer of a project may not resume its runs (403)."""

    permission_classes = [IsResearcher]
    serializer_class = BenchmarkRunSerializer

    def get_queryset(self):
        return benchmark_run_list(user=self.request.user)

    @extend_schema(request=BenchmarkRunCreateSerializer, responses={201: BenchmarkRunSerializer})
    def create(self, request):
        data_in = BenchmarkRunCreateSerializer(data=request.data)
        data_in.is_valid(raise_exception=True)
        d = data_in.validated_data
        # A project named is checked first; else the service takes the config's or datasets' project
        # (core.projects.project_for_new), as transformation runs and studies do.
        project = project_for_new_or_400(request.user, d["project"]) if d.get("project") else None
        common = {
            "models": d["models"],
            "limit": d.get("limit"),
            "split": d["split"],
            "name": d["name"],
            "created_by": request.user,
            "project": project,
            "preset": d.get("preset", ""),
        }
        try:
            seeds = d.get("seeds")
            has_config = d.get("config_id") is not None or d.get("config_text") is not None
            if d.get("preset") and has_config:
                # The paper's transformation seeds; explicit seeds must be among them.
                seeds = list(resolve_preset(d["preset"], seeds=seeds).seeds)
            narrowing = {"datasets": d.get("datasets"), "seeds": seeds, "evidence_override": d["run_anyway"]}
            if d.get("config_id") is not None:
                config = get_object_or_404(scoped(BenchmarkConfig.objects.all(), request.user), pk=d["config_id"])
                # The JSON rendering: YAML exported before anchors were refused may hold some.
                run = benchmark_run_create_from_config(text=config.json_text, fmt="json", **narrowing, **common)
            elif d.get("config_text") is not None:
                run = benchmark_run_create_from_config(
                    text=d["config_text"], fmt=d["config_format"], **narrowing, **common
                )
            else:
                run = benchmark_run_create_from_datasets(datasets=d["datasets"], **common)
        except ProjectAccessError:
            raise  # the inputs' project, which the caller may only read: 403
        except (ShiftlabError, ValueError) as exc:  # ValueError: seeds that are not the preset's
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(BenchmarkRunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: BenchmarkResultSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def results(self, request, pk=None):
        run = self.get_object()
        page = self.paginate_queryset(benchmark_result_list(run=run))
        return self.get_paginated_response(BenchmarkResultSerializer(page, many=True).data)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def report(self, request, pk=None):
        """Aggregates per model (original, per transformation and axis with SD over seeds, total) and every unit."""
        return Response(benchmark_report(run=self.get_object()).as_dict())

    @extend_schema(parameters=[RobustnessOptionsSerializer], responses={200: dict})
    @action(detail=True, methods=["get"])
    def robustness(self, request, pk=None):
        """The robustness report: shift statistics (pooled and run-aggregated, Holm-adjusted), model vs
        baseline, Kendall's τ, split-half reliability, drift vs quality, rankings with rank intervals and
        letters, and notes on empty sections. Query parameters choose the statistics' units; unset ones
        are the run's preset's, or the multi-axis paper's protocol; one that differs from the run's
        preset is refused (400)."""
        chosen = RobustnessOptionsSerializer(data=request.query_params)
        chosen.is_valid(raise_exception=True)
        run = self.get_object()
        try:
            options = robustness_options(run=run, values=chosen.validated_data)
        except ReportOptionError as exc:
            raise ValidationError({"detail": str(exc)}) from None
        report = robustness_report_get(run=run, options=options)
        files = robustness_report_files(report, figures=False)
        return Response(json.loads(files[JSON_NAME]))

    @extend_schema(request=None, responses={202: BenchmarkRunSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        run = self.get_object()
        project_require_write(request.user, run.project)
        run = benchmark_run_resume(run_id=run.pk, actor=request.user)
        return Response(BenchmarkRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)
