from dataclasses import asdict

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.permissions import IsResearcher
from core.projects import (
    project_require_write,
    project_resolve,
    projects_readable,
)
from core.serializers import valid_input
from transforms.judge_services import (
    JudgeReportCreateRequest,
    JudgeReportResumeRequest,
    judge_report_create,
    judge_report_resume,
)
from transforms.judge_tables import report_tables, tables_csv
from transforms.prompt_services import (
    prompt_template_activate,
    prompt_template_create_version,
    prompt_templates_ensure_defaults_of,
)
from transforms.selectors import (
    judge_report_list,
    prompt_template_list,
    transform_run_list,
    transform_run_summary,
    transformed_item_list,
)
from transforms.sensitivity_services import prompt_sensitivity_report
from transforms.serializers import (
    JudgeReportCreateSerializer,
    JudgeReportSerializer,
    PromptTemplateCreateSerializer,
    PromptTemplateSerializer,
    TransformedItemSerializer,
    TransformRunCreateSerializer,
    TransformRunSerializer,
)
from transforms.services import (
    TransformRunResumeRequest,
    TransformRunsStartRequest,
    transform_run_resume,
    transform_runs_start,
)


class PromptTemplateViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Prompt versions of your projects (``?project=SLUG`` for one, ``?active=1`` for the versions in
    use). POST creates (and activates) a new version of a key in a project; versions never change.
    Every project has its own versions and its own active one per key."""

    permission_classes = [IsResearcher]
    serializer_class = PromptTemplateSerializer

    def get_queryset(self):
        templates = prompt_template_list(user=self.request.user)
        if self.request.query_params.get("active"):
            templates = templates.filter(is_active=True)
        if self.request.query_params.get("project"):
            templates = templates.filter(project__slug=self.request.query_params["project"])
        return templates.order_by("project__slug", "key", "-version")

    def list(self, request, *args, **kwargs):
        projects = projects_readable(request.user)
        if request.query_params.get("project"):
            projects = projects.filter(slug=request.query_params["project"])
        prompt_templates_ensure_defaults_of(projects)
        return super().list(request, *args, **kwargs)

    @extend_schema(request=PromptTemplateCreateSerializer, responses={201: PromptTemplateSerializer})
    def create(self, request):
        data = valid_input(PromptTemplateCreateSerializer, request)
        project = project_resolve(request.user, data.pop("project", None))
        template = prompt_template_create_version(created_by=request.user, project=project, **data)
        return Response(PromptTemplateSerializer(template).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: PromptTemplateSerializer})
    @action(detail=True, methods=["post"])
    def activate(self, request, pk=None):
        """Make this version the active one of its key in its project; other projects keep theirs."""
        template = self.get_object()
        project_require_write(request.user, template.project)
        template = prompt_template_activate(template=template, actor=request.user)
        return Response(PromptTemplateSerializer(template).data)


class TransformRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Transformation runs: POST starts one (202); poll it for progress; read outputs and summary."""

    permission_classes = [IsResearcher]
    serializer_class = TransformRunSerializer

    def get_queryset(self):
        return transform_run_list(user=self.request.user)

    @extend_schema(request=TransformRunCreateSerializer, responses={202: TransformRunSerializer})
    def create(self, request):
        """Start a run; with a preset and no seed, one run per preset seed (the answer is then a list)."""
        data = valid_input(TransformRunCreateSerializer, request)
        runs = transform_runs_start(actor=request.user, request=TransformRunsStartRequest(**data))
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
        run = transform_run_resume(actor=request.user, request=TransformRunResumeRequest(run=self.get_object().pk))
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
        result = prompt_sensitivity_report(run_ids=run_ids, user=request.user)
        return Response(asdict(result))


class JudgeReportViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """LLM judge reports: POST queues one (202); poll it for progress; export its tables."""

    permission_classes = [IsResearcher]
    serializer_class = JudgeReportSerializer

    def get_queryset(self):
        return judge_report_list(user=self.request.user)

    @extend_schema(request=JudgeReportCreateSerializer, responses={202: JudgeReportSerializer})
    def create(self, request):
        data = valid_input(JudgeReportCreateSerializer, request)
        report = judge_report_create(actor=request.user, request=JudgeReportCreateRequest(**data))
        report.refresh_from_db()
        return Response(JudgeReportSerializer(report).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: JudgeReportSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        """Queue the report again; judgements already made come from the cache."""
        asked = JudgeReportResumeRequest(report=self.get_object().pk)
        report = judge_report_resume(actor=request.user, request=asked)
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
