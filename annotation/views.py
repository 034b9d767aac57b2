"""Pages of studies for researchers: builder, progress, review queue, gate and approval, export.
Thin: each POST calls one service and reports its outcome as a message."""

from collections.abc import Iterator
from contextlib import contextmanager

from celery.result import EagerResult
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from annotation.adaptive_services import study_adaptive_decisions
from annotation.argilla_services import study_publish
from annotation.config_export import config_render
from annotation.control_pool import control_pool_from_upload
from annotation.control_services import study_control_detectability
from annotation.design import QUESTIONS, DesignError, StudyDesign, StudyKind
from annotation.design_services import study_create, study_design, study_lock, study_revise
from annotation.export_services import benchmark_config_export
from annotation.gate_services import approval_decide, gate_result_current, study_gate
from annotation.gating import gate_state_of
from annotation.models import Annotator, BenchmarkConfig, Flag, GateResult, Study
from annotation.quality_services import quality_figures, study_annotator_quality
from annotation.selectors import benchmark_config_list, flag_list, gate_result_list, study_list, study_progress
from annotation.sync_services import sync_summary
from annotation.tasks import sync_study
from annotation.validation_services import (
    annotator_reject,
    annotator_replace,
    flag_review,
    study_item_translate,
    study_validate,
)
from core.errors import ShiftlabError
from core.roles import Role
from core.views import researcher_required
from transforms.models import TransformRun

DESIGN_NUMBERS = (
    "items_per_transformation",
    "raters_per_item",
    "batch_size",
    "controls_per_batch",
    "min_control_ratings",
    "control_margin",
    "low_rating_max",
    "max_confirmed_flags",
    "seed",
)
DESIGN_FLOATS = ("llm_flag_deviation", "acceptance_threshold")


@contextmanager
def _refusals_as_messages(request, errors: tuple[type[Exception], ...] = (ShiftlabError,)) -> Iterator[None]:
    """A service's refusal becomes an error message on the page the view goes on to show."""
    try:
        yield
    except errors as exc:
        messages.error(request, str(exc))


def benchmark_config_response(config: BenchmarkConfig, fmt: str) -> HttpResponse:
    """An exported config as a file download, in ``fmt`` (json or yaml)."""
    # YAML is rendered again from the stored document: exports written before anchors were
    # refused carry YAML aliases; the re-rendered file has the same content and hash, without them.
    response = HttpResponse(
        config.json_text if fmt == "json" else config_render(config.document, "yaml"),
        content_type="application/json" if fmt == "json" else "application/yaml",
    )
    response["Content-Disposition"] = f'attachment; filename="benchmark-config-{config.config_hash[:12]}.{fmt}"'
    return response


def _design_from_post(post, base: StudyDesign) -> StudyDesign:
    values = base.to_dict()
    for name in DESIGN_NUMBERS:
        if post.get(name, "").strip():
            try:
                values[name] = int(post[name])
            except ValueError:
                raise DesignError(f"design.{name} must be a whole number, got {post[name]!r}") from None
    for name in DESIGN_FLOATS:
        if post.get(name, "").strip():
            try:
                values[name] = float(post[name])
            except ValueError:
                raise DesignError(f"design.{name} must be a number, got {post[name]!r}") from None
    if post.get("kind"):
        values["kind"] = post["kind"]
    if "llm_judges" in post:
        values["llm_judges"] = [a.strip() for a in post["llm_judges"].split(",") if a.strip()]
    if "guidelines" in post:
        values["guidelines"] = post["guidelines"]
    return StudyDesign.from_dict(values)


@researcher_required
def study_list_view(request):
    """The study builder: existing studies and a form declaring a new one."""
    if request.method == "POST":
        with _refusals_as_messages(request, (ShiftlabError, DesignError)):
            runs = list(TransformRun.objects.filter(pk__in=request.POST.getlist("runs")))
            study = study_create(
                name=request.POST.get("name", "").strip(),
                project=request.POST.get("project", "").strip() or "shiftlab",
                runs=runs,
                design=_design_from_post(request.POST, StudyDesign()),
                created_by=request.user,
            )
            messages.success(request, f"Study {study} created as a draft: check the design, then lock it.")
            return redirect("annotation:study", pk=study.pk)
    return render(
        request,
        "annotation/study_list.html",
        {
            "studies": study_list()[:200],
            "default": StudyDesign(),
            "kinds": list(StudyKind),
            "runs": TransformRun.objects.filter(status=TransformRun.Status.SUCCEEDED).select_related("dataset")[:200],
        },
    )


@researcher_required
def study_detail_view(request, pk: int):
    """Design, progress (per-annotator counts, control pass rates, live agreement) and actions."""
    study = get_object_or_404(Study, pk=pk)
    if request.method == "POST":
        action = request.POST.get("action")
        with _refusals_as_messages(request, (ShiftlabError, DesignError)):
            if action == "lock":
                upload = request.FILES.get("control_pool")
                pool = control_pool_from_upload(upload.read(), upload.name) if upload else ()
                study_lock(study=study, actor=request.user, control_pool=pool)
                messages.success(request, "Locked: items and controls are drawn; the design is frozen.")
            elif action == "revise":
                revised = study_revise(
                    study=study, design=_design_from_post(request.POST, study_design(study)), actor=request.user
                )
                messages.success(request, f"New version {revised} created as a draft.")
                return redirect("annotation:study", pk=revised.pk)
            elif action == "publish":
                users = get_user_model().objects.filter(pk__in=request.POST.getlist("annotators"))
                result = study_publish(study=study, annotators=users, actor=request.user)
                messages.success(request, f"Published {result.records} records to Argilla.")
                for username, password in result.new_accounts.items():
                    messages.info(
                        request,
                        f"New Argilla account {username}, initial password: {password} (shown once: hand it over now).",
                    )
            elif action in ("reject", "replace"):
                annotator = get_object_or_404(Annotator, pk=request.POST.get("annotator"), study=study)
                reason = request.POST.get("reason", "")
                if action == "reject":
                    rejected = annotator_reject(annotator=annotator, detail=reason, actor=request.user)
                    moved = rejected.release.summary() if rejected.release else "they had no items"
                    messages.success(request, f"Rejected {annotator.user.get_username()}: {moved}.")
                else:
                    user = get_object_or_404(get_user_model(), pk=request.POST.get("user"))
                    replaced = annotator_replace(annotator=annotator, user=user, reason=reason, actor=request.user)
                    messages.success(
                        request,
                        f"{user.get_username()} replaces {annotator.user.get_username()}: "
                        f"{replaced.release.summary()}.",
                    )
                    for username, password in replaced.new_accounts.items():
                        messages.info(
                            request,
                            f"New Argilla account {username}, initial password: {password} "
                            "(shown once: hand it over now).",
                        )
            elif action == "sync":
                queued = sync_study.delay(study.pk)
                if isinstance(queued, EagerResult):  # no broker: it already ran, in this request
                    messages.success(request, f"Synced: {sync_summary(queued.get())}.")
                else:
                    messages.success(
                        request, "Sync queued: a worker runs it; reload this page to see its result under Argilla."
                    )
            elif action == "validate":
                messages.success(request, study_validate(study=study, actor=request.user).summary())
            elif action == "gate":
                results = study_gate(study=study, actor=request.user)
                messages.success(
                    request,
                    "Gate: " + ", ".join(f"{r.transformation} {gate_state_of(r.evidence).label}" for r in results),
                )
                return redirect("annotation:gate", pk=study.pk)
        return redirect("annotation:study", pk=study.pk)
    design = study_design(study)
    annotator_users = get_user_model().objects.filter(groups__name=Role.ANNOTATOR, is_active=True).order_by("username")
    return render(
        request,
        "annotation/study_detail.html",
        {
            "study": study,
            "design": design,
            "questions": QUESTIONS[design.kind],
            "progress": study_progress(study=study),
            "annotator_users": annotator_users,
            "open_flags": flag_list(study=study).count(),
            "runs": study.runs.select_related("dataset"),
            "last_sync": sync_summary(study.last_sync) if study.last_sync else "",
            "detectability": study_control_detectability(study=study) if study.is_locked else None,
            "adaptive": study_adaptive_decisions(study=study),
        },
    )


@researcher_required
def review_queue_view(request, pk: int):
    """Open flags of a study: confirm or dismiss each; translate non-English items to English."""
    study = get_object_or_404(Study, pk=pk)
    if request.method == "POST":
        flag = get_object_or_404(Flag, pk=request.POST.get("flag"), rating__study_item__study=study)
        with _refusals_as_messages(request):
            if request.POST.get("action") == "translate":
                study_item_translate(item=flag.rating.study_item, actor=request.user)
            else:
                decision = request.POST.get("decision", "")
                flag_review(flag=flag, decision=decision, note=request.POST.get("note", ""), actor=request.user)
                messages.success(request, f"Flag {flag.pk} {decision}.")
        return redirect("annotation:review", pk=study.pk)
    return render(
        request,
        "annotation/review_queue.html",
        {
            "study": study,
            "flags": flag_list(study=study),
            "reviewed": flag_list(study=study, status=None).exclude(status=Flag.Status.OPEN)[:200],
        },
    )


@researcher_required
def gate_view(request, pk: int):
    """Current gate result per transformation with its evidence, and the approval decision."""
    study = get_object_or_404(Study, pk=pk)
    if request.method == "POST":
        result = get_object_or_404(GateResult, pk=request.POST.get("gate_result"), study=study)
        with _refusals_as_messages(request):
            decision = request.POST.get("decision", "")
            approval_decide(
                gate_result=result, decision=decision, comment=request.POST.get("comment", ""), actor=request.user
            )
            messages.success(request, f"{result.transformation}: {decision}d.")
        return redirect("annotation:gate", pk=study.pk)
    names = sorted({r.transformation for r in study.runs.all()})
    current = []
    for name in names:
        result = gate_result_current(study=study, transformation=name)
        current.append((name, result, gate_state_of(result.evidence) if result else None))
    return render(
        request,
        "annotation/gate.html",
        {
            "study": study,
            "current": current,
            "history": gate_result_list(study=study)[:100],
            "questions": [q.name for q in study_design(study).questions],
        },
    )


@researcher_required
def export_view(request):
    """Exported benchmark configs, and a button exporting every approved transformation."""
    if request.method == "POST":
        with _refusals_as_messages(request):
            config = benchmark_config_export(actor=request.user, name=request.POST.get("name", "").strip())
            messages.success(request, f"Exported config {config.config_hash[:12]}.")
        return redirect("annotation:exports")
    return render(request, "annotation/exports.html", {"configs": benchmark_config_list()[:100]})


@researcher_required
def export_download_view(request, pk: int, fmt: str):
    config = get_object_or_404(benchmark_config_list(), pk=pk)
    if fmt not in ("json", "yaml"):
        # A fixed text: the path segment is never echoed (it would be reflected into the page).
        return HttpResponse("unknown format: use json or yaml", status=404, content_type="text/plain; charset=utf-8")
    return benchmark_config_response(config, fmt)


@researcher_required
def study_annotators_view(request, pk: int):
    """Annotator quality of a study, computed now from its ratings: a table and three figures."""
    study = get_object_or_404(Study, pk=pk)
    report = study_annotator_quality(study=study)
    return render(
        request,
        "annotation/study_annotators.html",
        {"study": study, "design": study_design(study), "report": report, "figures": quality_figures(report)},
    )
