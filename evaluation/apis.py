import json

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.permissions import IsResearcher
from evaluation.benchmark_execution import BenchmarkRunResumeRequest, benchmark_run_resume
from evaluation.benchmark_services import BenchmarkRunStartRequest, benchmark_run_start
from evaluation.report_robustness import JSON_NAME, robustness_options, robustness_report_files, robustness_report_get
from evaluation.reports import benchmark_report
from evaluation.selectors import benchmark_result_list, benchmark_run_list
from evaluation.serializers import (
    BenchmarkResultSerializer,
    BenchmarkRunCreateSerializer,
    BenchmarkRunSerializer,
    RobustnessOptionsSerializer,
)


class BenchmarkRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Benchmark runs: POST starts one (from a validated config or, original data only, from
    datasets) in ``project`` (default: its inputs' project, else the caller's own), through
    ``benchmark_run_start`` as the page and the command do; `results` lists every unit,
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
        run = benchmark_run_start(
            actor=request.user,
            request=BenchmarkRunStartRequest(
                project=d.get("project"),
                models=d["models"],
                config_id=d.get("config_id"),
                config_text=d.get("config_text"),
                config_format=d["config_format"],
                datasets=d.get("datasets"),
                seeds=d.get("seeds"),
                preset=d.get("preset", ""),
                run_anyway=d["run_anyway"],
                limit=d.get("limit"),
                sides=d.get("sides"),
                document_scope=d.get("document_scope"),
                split=d["split"],
                name=d["name"],
            ),
        )
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
        options = robustness_options(run=run, values=chosen.validated_data)
        report = robustness_report_get(run=run, options=options)
        files = robustness_report_files(report, figures=False)
        return Response(json.loads(files[JSON_NAME]))

    @extend_schema(request=None, responses={202: BenchmarkRunSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        run = benchmark_run_resume(actor=request.user, request=BenchmarkRunResumeRequest(run=self.get_object().pk))
        return Response(BenchmarkRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)
