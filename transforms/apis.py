from dataclasses import asdict

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.errors import ShiftlabError
from core.permissions import IsResearcher
from corpora.models import Dataset
from transforms.judge_services import judge_report_create, judge_report_resume
from transforms.judge_tables import report_tables, tables_csv
from transforms.models import PromptTemplate
from transforms.selectors import judge_report_list, transform_run_list, transform_run_summary, transformed_item_list
from transforms.sensitivity_services import prompt_sensitivity_report
from transforms.serializers import (
    JudgeReportCreateSerializer,
    JudgeReportSerializer,
    PromptTemplateSerializer,
    TransformedItemSerializer,
    TransformRunCreateSerializer,
    TransformRunSerializer,
)
from transforms.services import (
    prompt_template_create_version,
    prompt_templates_ensure_defaults,
    transform_run_resume,
    transform_run_settings,
    transform_runs_create,
)


class PromptTemplateViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Prompt versions. POST creates (and activates) a new version of a key; versions never change."""

    permission_classes = [IsResearcher]
    serializer_class = PromptTemplateSerializer

    queryset = PromptTemplate.objects.all()

    def get_queryset(self):
        templates = super().get_queryset()
        if self.request.query_params.get("active"):
            templates = templates.filter(is_active=True)
        return templates

    def list(self, request, *args, **kwargs):
        prompt_templates_ensure_defaults()
        return super().list(request, *args, **kwargs)

    def create(self, request):
        data_in = PromptTemplateSerializer(data=request.data)
        data_in.is_valid(raise_exception=True)
        try:
            template = prompt_template_create_version(created_by=request.user, **data_in.validated_data)
        except ShiftlabError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(PromptTemplateSerializer(template).data, status=status.HTTP_201_CREATED)


class TransformRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Transformation runs: POST starts one (202); poll it for progress; read outputs and summary."""

    permission_classes = [IsResearcher]
    serializer_class = TransformRunSerializer

    def get_queryset(self):
        return transform_run_list()

    @extend_schema(request=TransformRunCreateSerializer, responses={202: TransformRunSerializer})
    def create(self, request):
        """Start a run; with a preset and no seed, one run per preset seed (the answer is then a list)."""
        data_in = TransformRunCreateSerializer(data=request.data)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        dataset = get_object_or_404(Dataset, name=data["dataset"])
        try:
            settings = transform_run_settings(
                preset=data.get("preset", ""),
                seed=data.get("seed"),
                temperature=data.get("temperature"),
                top_p=data.get("top_p"),
                max_tokens=data.get("max_tokens"),
                max_attempts=data.get("max_attempts"),
                languages=data.get("languages"),
            )
            runs = transform_runs_create(
                dataset=dataset,
                transformation=data["transformation"],
                settings=settings,
                backend_alias=data["backend"],
                limit=data.get("limit"),
                language_check=data["language_check"],
                created_by=request.user,
            )
        except (ShiftlabError, ImproperlyConfigured) as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        for run in runs:
            run.refresh_from_db()
        body = TransformRunSerializer(runs, many=True).data if len(runs) > 1 else TransformRunSerializer(runs[0]).data
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=TransformedItemSerializer(many=True))
    @action(detail=True, methods=["get"])
    def outputs(self, request, pk=None):
        failed = request.query_params.get("failed")
        outputs = transformed_item_list(run=self.get_object(), failed=None if failed is None else failed == "1")
        page = self.paginate_queryset(outputs)
        return self.get_paginated_response(TransformedItemSerializer(page, many=True).data)

    @extend_schema(request=None, responses={202: TransformRunSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        """Queue the texts that have no outcome yet; finished ones and cached generations are reused."""
        run = transform_run_resume(run_id=self.get_object().pk, actor=request.user)
        run.refresh_from_db()
        return Response(TransformRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @action(detail=True, methods=["get"])
    def summary(self, request, pk=None):
        return Response(asdict(transform_run_summary(run=self.get_object())))

    @extend_schema(
        parameters=[OpenApiParameter("runs", str, description="Run ids separated by commas, e.g. 3,4,5.")],
        responses={200: dict},
    )
    @action(detail=False, methods=["get"])
    def sensitivity(self, request):
        """The prompt-sensitivity report of runs of one transformation under different prompt versions."""
        raw = request.query_params.get("runs", "")
        try:
            run_ids = [int(part) for part in raw.split(",") if part.strip()]
        except ValueError:
            return Response({"runs": [f"run ids separated by commas, got {raw!r}"]}, status=status.HTTP_400_BAD_REQUEST)
        try:
            result = prompt_sensitivity_report(run_ids=run_ids)
        except ShiftlabError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(asdict(result))


class JudgeReportViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """LLM judge reports: POST queues one (202); poll it for progress; export its tables."""

    permission_classes = [IsResearcher]
    serializer_class = JudgeReportSerializer

    def get_queryset(self):
        return judge_report_list()

    @extend_schema(request=JudgeReportCreateSerializer, responses={202: JudgeReportSerializer})
    def create(self, request):
        data_in = JudgeReportCreateSerializer(data=request.data)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        try:
            report = judge_report_create(created_by=request.user, **data)
        except (ShiftlabError, ImproperlyConfigured) as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        report.refresh_from_db()
        return Response(JudgeReportSerializer(report).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: JudgeReportSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        """Queue the report again; judgements already made come from the cache."""
        report = judge_report_resume(report_id=self.get_object().pk, actor=request.user)
        return Response(JudgeReportSerializer(report).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={(200, "text/csv"): str})
    @action(detail=True, methods=["get"], url_path="csv")
    def export_csv(self, request, pk=None):
        """The report's tables in long form (table, row, column, value)."""
        report = self.get_object()
        if report.result is None:
            return Response(
                {"detail": f"report {report.pk} is {report.status}: no result yet"}, status=status.HTTP_409_CONFLICT
            )
        response = HttpResponse(tables_csv(report_tables(report.kind, report.result)), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="judge-report-{report.pk}.csv"'
        return response
