"""Researcher API of studies (IsResearcher everywhere), and one route of annotators: setting the
password of their own Argilla account (``/api/me/argilla-password/``)."""

from dataclasses import asdict
from operator import attrgetter

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export, benchmark_config_verify
from annotation.models import Annotator, Flag, GateResult, StudyJob
from annotation.selectors import (
    benchmark_config_list,
    flag_list,
    gate_result_list,
    roster_annotators,
    study_list,
    study_progress,
)
from annotation.serializers import (
    AnnotatorSerializer,
    ArgillaPasswordSerializer,
    BenchmarkConfigExportSerializer,
    BenchmarkConfigSerializer,
    BenchmarkConfigVerifySerializer,
    DecisionSerializer,
    FlagReviewSerializer,
    FlagSerializer,
    GateResultSerializer,
    RejectSerializer,
    ReplaceSerializer,
    StudyCreateSerializer,
    StudyDesignSerializer,
    StudyItemSerializer,
    StudyJobSerializer,
    StudyPublishSerializer,
    StudySerializer,
)
from annotation.studies.adaptive_services import study_adaptive_rows
from annotation.studies.argilla_services import study_sync_queue
from annotation.studies.control_pool import control_pool_from_upload
from annotation.studies.control_services import study_control_detectability
from annotation.studies.design_services import (
    StudyCreateRequest,
    StudyReviseRequest,
    study_create,
    study_lock,
    study_revise,
    study_update_design,
)
from annotation.studies.gate_services import approval_decide, study_gate
from annotation.studies.onboarding_services import argilla_password_set_own
from annotation.studies.publish_job_services import study_publish_start
from annotation.studies.quality_services import quality_report_data, study_annotator_quality
from annotation.studies.validation_job_services import study_validation_start
from annotation.studies.validation_services import (
    annotator_reject,
    annotator_replace,
    flag_review,
    study_item_translate,
)
from annotation.views import benchmark_config_response
from core.login_guard import client_address
from core.permissions import IsAnnotator, IsResearcher
from core.projects import project_require_write, scoped
from core.serializers import valid_input


def _job_response(job: StudyJob) -> Response:
    """A started job as the API answers it: 200 once finished, 202 while it runs."""
    finished = job.status in (StudyJob.Status.SUCCEEDED, StudyJob.Status.FAILED)
    return Response(StudyJobSerializer(job).data, status=status.HTTP_200_OK if finished else status.HTTP_202_ACCEPTED)


class ProjectScopedMixin:
    """Objects of the projects the caller may read (others are 404); ``get_changeable_object``
    also refuses (403) a caller who may only read the object's project, before any service runs.
    ``project_via`` is the lookup path from the model to its project."""

    project_via = "project"

    def scope(self, queryset):
        return scoped(queryset, self.request.user, via=self.project_via)

    def get_changeable_object(self):
        obj = self.get_object()
        project_require_write(self.request.user, attrgetter(self.project_via.replace("__", "."))(obj))
        return obj


class StudyViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Validation studies: create, change the design (a locked study gets a new version), lock,
    publish to Argilla, sync responses, validate, gate; read progress and items."""

    permission_classes = [IsResearcher]
    serializer_class = StudySerializer

    def get_queryset(self):
        return self.scope(study_list())

    @extend_schema(request=StudyCreateSerializer, responses={201: StudySerializer})
    def create(self, request):
        data = valid_input(StudyCreateSerializer, request)
        asked = StudyCreateRequest(
            name=data["name"], runs=data["runs"], design=data["design"], project=data["project"] or None
        )
        study = study_create(actor=request.user, request=asked)
        return Response(StudySerializer(study).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=StudyDesignSerializer, responses={200: StudySerializer, 201: StudySerializer})
    @action(detail=True, methods=["post"])
    def design(self, request, pk=None):
        """Change the design: in place while a draft, otherwise as a new version (201)."""
        study = self.get_changeable_object()
        asked = StudyReviseRequest(study=study, design=valid_input(StudyDesignSerializer, request)["design"])
        if study.is_locked:
            revised = study_revise(actor=request.user, request=asked)
            return Response(StudySerializer(revised).data, status=status.HTTP_201_CREATED)
        study = study_update_design(actor=request.user, request=asked)
        return Response(StudySerializer(study).data)

    @extend_schema(request=None, responses=StudySerializer)
    @action(detail=True, methods=["post"])
    def lock(self, request, pk=None):
        """Lock the design and draw items; an optional multipart file ``control_pool`` supplies
        control pairs (see docs/annotation.md)."""
        study = self.get_changeable_object()
        upload = request.FILES.get("control_pool")
        pool = control_pool_from_upload(upload) if upload else None
        study = study_lock(study=study, actor=request.user, control_pool=pool)
        return Response(StudySerializer(study).data)

    @extend_schema(request=StudyPublishSerializer, responses={200: StudySerializer, 202: StudyJobSerializer})
    @action(detail=True, methods=["post"])
    def publish(self, request, pk=None):
        """Start publishing to Argilla, to annotators on the roster of the study's project, as a
        job (a publish already running with the same annotators is joined): 202 with the job while
        it runs (follow it at ``jobs/``); 200 with the study, ``new_accounts`` (the Argilla accounts
        made now: each annotator sets their own password) and the job once it has finished (no
        broker: it ran in this request)."""
        study = self.get_changeable_object()
        data = valid_input(StudyPublishSerializer, request)
        users = roster_annotators(study.project, data["annotators"])
        job = study_publish_start(study=study, annotators=users, actor=request.user)
        job.refresh_from_db()
        if job.status != StudyJob.Status.SUCCEEDED:
            return _job_response(job)
        study.refresh_from_db()
        return Response(
            {
                **StudySerializer(study).data,
                "new_accounts": job.result.get("new_accounts", []),
                "job": StudyJobSerializer(job).data,
            }
        )

    @extend_schema(request=None, responses={202: None})
    @action(detail=True, methods=["post"])
    def sync(self, request, pk=None):
        """Queue a sync of submitted responses (runs at once in the single-machine default)."""
        outcome = study_sync_queue(study=self.get_changeable_object())
        return Response({"task_id": outcome.id}, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={200: StudyJobSerializer, 202: StudyJobSerializer})
    @action(detail=True, methods=["post"])
    def validate(self, request, pk=None):
        """Start validating the study (LLM estimates, control checks, flags, rejections) as a job on
        the ``llm`` queue; a validation already running is joined. 202 with the job while it runs
        (follow it at ``jobs/``), 200 once it has finished (no broker: it ran in this request),
        its ``result`` holding the counts."""
        job = study_validation_start(study=self.get_changeable_object(), actor=request.user)
        job.refresh_from_db()
        return _job_response(job)

    @extend_schema(responses=StudyJobSerializer(many=True))
    @action(detail=True, methods=["get"])
    def jobs(self, request, pk=None):
        """The study's validation and publish jobs, newest first (the last 20)."""
        return Response(StudyJobSerializer(self.get_object().jobs.all()[:20], many=True).data)

    @extend_schema(request=None, responses=GateResultSerializer(many=True))
    @action(detail=True, methods=["post"])
    def gate(self, request, pk=None):
        study = self.get_changeable_object()
        results = study_gate(study=study, actor=request.user)
        return Response(GateResultSerializer(results, many=True).data)

    @extend_schema(responses=None)
    @action(detail=True, methods=["get"])
    def progress(self, request, pk=None):
        study = self.get_object()
        progress = study_progress(study=study)
        detectability = study_control_detectability(study=study) if study.is_locked else None
        return Response(
            {
                "n_real": progress.n_real,
                "n_controls": progress.n_controls,
                "n_complete": progress.n_complete,
                "annotators": [
                    {
                        **{k: v for k, v in asdict(a).items() if k != "annotator"},
                        "username": a.annotator.user.username,
                        "status": a.annotator.status,
                    }
                    for a in progress.annotators
                ],
                "agreement": progress.agreement,
                "control_detectability": asdict(detectability) if detectability else None,
                "adaptive": {
                    row.transformation: {
                        **row.decision.to_dict(),
                        "summary": row.decision.summary(),
                        "forecast": row.forecast.to_dict() if row.forecast else None,
                        "forecast_summary": row.forecast_line,
                        # What the gate rests on (designs with the gate options of issue 40).
                        **({"gate": row.outcome.to_dict()} if row.outcome is not None and not row.classic else {}),
                    }
                    for row in study_adaptive_rows(study=study)
                },
            }
        )

    @extend_schema(responses=StudyItemSerializer(many=True))
    @action(detail=True, methods=["get"])
    def items(self, request, pk=None):
        page = self.paginate_queryset(self.get_object().items.order_by("position"))
        return self.get_paginated_response(StudyItemSerializer(page, many=True).data)

    @extend_schema(responses=AnnotatorSerializer(many=True))
    @action(detail=True, methods=["get"])
    def annotators(self, request, pk=None):
        return Response(AnnotatorSerializer(self.get_object().annotators.select_related("user"), many=True).data)

    @extend_schema(responses=None)
    @action(detail=True, methods=["get"], url_path="annotator-quality")
    def annotator_quality(self, request, pk=None):
        """Per annotator: time per item, straight-lining, control pass rate, deviation from peers
        and the LLM, and the rater model's competence with its 95% interval (computed now)."""
        return Response(quality_report_data(study_annotator_quality(study=self.get_object())))


class AnnotatorViewSet(ProjectScopedMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Study annotators; POST reject removes one with a reason (and from the Argilla workspace)."""

    permission_classes = [IsResearcher]
    serializer_class = AnnotatorSerializer
    project_via = "study__project"

    def get_queryset(self):
        return self.scope(Annotator.objects.select_related("user", "study__project"))

    @extend_schema(request=RejectSerializer, responses=AnnotatorSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        annotator = self.get_changeable_object()
        data = valid_input(RejectSerializer, request)
        annotator_reject(annotator=annotator, detail=data["reason"], actor=request.user)
        annotator.refresh_from_db()
        return Response(AnnotatorSerializer(annotator).data)

    @extend_schema(request=ReplaceSerializer, responses=AnnotatorSerializer)
    @action(detail=True, methods=["post"])
    def replace(self, request, pk=None):
        """Replace an annotator who leaves: their unsubmitted items go to ``username``, an annotator
        on the roster of the study's project (who gets an Argilla account if needed: named in
        ``new_accounts``; they set its password themselves)."""
        annotator = self.get_changeable_object()
        data = valid_input(ReplaceSerializer, request)
        (user,) = roster_annotators(annotator.study.project, [data["username"]])
        result = annotator_replace(annotator=annotator, user=user, reason=data["reason"], actor=request.user)
        newcomer = Annotator.objects.select_related("user").get(study=annotator.study, user=user)
        return Response(
            {
                **AnnotatorSerializer(newcomer).data,
                "moved": result.release.given,
                "new_accounts": list(result.new_accounts),
            }
        )


class FlagViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The review queue: flags (``?status=open`` by default, ``?study=<id>``); confirm or dismiss."""

    permission_classes = [IsResearcher]
    serializer_class = FlagSerializer
    project_via = "rating__study_item__study__project"

    def get_queryset(self):
        study = self.request.query_params.get("study")
        wanted = self.request.query_params.get("status", Flag.Status.OPEN)
        flags = self.scope(flag_list(status=None if wanted == "all" else wanted))
        return flags.filter(rating__study_item__study_id=study) if study else flags

    @extend_schema(request=FlagReviewSerializer, responses=FlagSerializer)
    @action(detail=True, methods=["post"])
    def review(self, request, pk=None):
        flag = self.get_changeable_object()
        data = valid_input(FlagReviewSerializer, request)
        flag = flag_review(flag=flag, actor=request.user, **data)
        return Response(FlagSerializer(flag).data)

    @extend_schema(request=None, responses=None)
    @action(detail=True, methods=["post"])
    def translate(self, request, pk=None):
        """English translations of the flagged item's non-English texts, from the default LLM."""
        item = self.get_changeable_object().rating.study_item
        translations = study_item_translate(item=item, actor=request.user)
        return Response({"translations": translations})


class GateResultViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Gate results with their evidence; POST decide approves or rejects the transformation."""

    permission_classes = [IsResearcher]
    serializer_class = GateResultSerializer
    project_via = "study__project"

    def get_queryset(self):
        study = self.request.query_params.get("study")
        results = self.scope(gate_result_list())
        return results.filter(study_id=study) if study else results

    @extend_schema(request=DecisionSerializer, responses=GateResultSerializer)
    @action(detail=True, methods=["post"])
    def decide(self, request, pk=None):
        result = self.get_changeable_object()
        data = valid_input(DecisionSerializer, request)
        approval_decide(gate_result=result, actor=request.user, **data)
        return Response(GateResultSerializer(GateResult.objects.get(pk=result.pk)).data)


class BenchmarkConfigViewSet(
    ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Validated benchmark configs: POST exports one (the approvals of one project's studies);
    download as YAML or JSON; verify a file."""

    permission_classes = [IsResearcher]
    serializer_class = BenchmarkConfigSerializer

    def get_queryset(self):
        return self.scope(benchmark_config_list())

    @extend_schema(request=BenchmarkConfigExportSerializer, responses={201: BenchmarkConfigSerializer})
    def create(self, request):
        data = valid_input(BenchmarkConfigExportSerializer, request)
        config = benchmark_config_export(
            actor=request.user,
            request=BenchmarkConfigExportRequest(
                project=data["project"] or None,
                studies=data.get("studies"),
                name=data["name"],
                sides=data.get("sides"),
                document_scope=data.get("document_scope"),
            ),
        )
        return Response(BenchmarkConfigSerializer(config).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={(200, "application/yaml"): str})
    @action(detail=True, methods=["get"], url_path="download/(?P<fmt>json|yaml)")
    def download(self, request, pk=None, fmt="yaml"):
        return benchmark_config_response(self.get_object(), fmt)

    @extend_schema(request=BenchmarkConfigVerifySerializer, responses={200: dict})
    @action(detail=False, methods=["post"])
    def verify(self, request):
        """Three facts about a config file: its content verifies (`content_ok`: hash and canonical
        form, with `problems`), it is one of this deployment's exports (`registered`), and its
        signature under this server's key (`signature`: valid, absent or invalid); `accepted` says
        whether a benchmark run would use it and `detail` why (not)."""
        data = valid_input(BenchmarkConfigVerifySerializer, request)
        check = benchmark_config_verify(text=data["text"], fmt=data["format"])
        return Response(
            {
                "ok": check.ok,
                **check.facts(),
                "problems": list(check.verification.problems),
                "config_hash": check.verification.declared_hash,
                "detail": check.acceptance.reason,
            }
        )


class ArgillaPasswordView(APIView):
    """An annotator sets the password of their own Argilla account (their Shiftlab password asked
    again); nobody else can. Annotators only."""

    permission_classes = [IsAnnotator]

    @extend_schema(request=ArgillaPasswordSerializer, responses={200: dict})
    def post(self, request):
        data = valid_input(ArgillaPasswordSerializer, request)
        argilla_password_set_own(user=request.user, address=client_address(request), **data)
        return Response({"detail": "Your Argilla password is set: sign in to Argilla with your username and it."})
