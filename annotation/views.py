"""Pages of studies for researchers: builder, progress, annotator access, review queue, gate and
approval, export; and the one page of annotators, "My Argilla account", where they set their own
Argilla password. Thin: each POST calls one service and reports its outcome as a message, or
answers with the page itself where it shows a form's errors."""

from urllib.parse import urlencode

from celery.result import EagerResult
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from annotation.configs.config_export import config_render
from annotation.configs.config_schema import PERTURBATION_DOCUMENT_SCOPES, PERTURBATION_SIDES
from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export, benchmark_config_preview
from annotation.forms import ArgillaPasswordForm, StudyCreateForm, StudyDesignForm
from annotation.models import Annotator, BenchmarkConfig, Flag, GateResult, Study, StudyJob
from annotation.science.adaptive_tables import adaptive_saving_table
from annotation.science.design import QUESTIONS
from annotation.science.gating import gate_state_of
from annotation.science.saving_forecast import MIN_FORECAST_ITEMS
from annotation.selectors import (
    benchmark_config_list,
    flag_list,
    gate_result_list,
    study_list,
    study_progress,
    study_stages,
)
from annotation.studies.adaptive_services import study_adaptive_rows
from annotation.studies.argilla_services import study_sync_queue
from annotation.studies.control_pool import control_pool_from_upload
from annotation.studies.control_services import study_control_detectability, study_detectability_notes
from annotation.studies.design_services import (
    StudyReviseRequest,
    study_create,
    study_design,
    study_draft,
    study_lock,
    study_lock_message,
    study_revise,
)
from annotation.studies.gate_services import approval_decide, gate_result_current, study_gate
from annotation.studies.judge_population_services import (
    judge_jobs_summary,
    study_judge_population_start,
    study_judge_populations,
)
from annotation.studies.onboarding_services import (
    annotator_argilla_home,
    annotator_studies,
    annotator_ui_url,
    argilla_password_set_own,
    study_sync_job,
)
from annotation.studies.publish_job_services import (
    new_accounts_text,
    publish_job_result,
    publish_summary,
    study_publish_start,
)
from annotation.studies.quality_services import quality_figures, study_annotator_quality
from annotation.studies.sync_services import sync_summary
from annotation.studies.validation_job_services import study_validation_start
from annotation.studies.validation_services import (
    annotator_reject,
    annotator_replace,
    flag_review,
    study_item_translate,
)
from core.errors import ShiftlabError
from core.job_services import UNFINISHED
from core.login_guard import client_address
from core.pages import refusals
from core.projects import project_require_write, projects_writable, scoped
from core.roles import Role, has_role
from core.rosters import project_annotators, roster_refusal
from core.views import researcher_required


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


def _readable_study(request, pk: int) -> Study:
    """The study, if the caller may read its project; otherwise 404 (its existence does not leak)."""
    return get_object_or_404(scoped(Study.objects.select_related("project"), request.user), pk=pk)


def _study_of_page(request, pk: int) -> Study:
    """``_readable_study``; a POST, which always changes the study, also needs write access (403)."""
    study = _readable_study(request, pk)
    if request.method == "POST":
        project_require_write(request.user, study.project)
    return study


@researcher_required
@require_http_methods(["GET", "POST"])
def study_list_view(request):
    """The study builder: existing studies and the design form. "Check the design" shows what it
    implies; "Create draft" declares it. A refused design keeps the input, reasons beside fields."""
    form = StudyCreateForm(request.POST or None, user=request.user)
    implications = None
    design = None
    if request.method == "POST" and form.is_valid():
        with refusals(request, form):  # a refused design keeps the input, reasons beside fields
            if request.POST.get("action") == "check":
                draft = study_draft(actor=request.user, request=form.request())
                form.add_problems(draft.problems)
                implications, design = draft.implications, draft.design
            else:
                study = study_create(actor=request.user, request=form.request())
                messages.success(request, f"Study {study} created as a draft: check the design, then lock it.")
                return redirect("annotation:study", pk=study.pk)
    design = design if implications else None
    saving_by_distance, saving_conditions = adaptive_saving_table(design)
    studies = list(scoped(study_list(), request.user)[:200])
    stages = study_stages(studies)
    return render(
        request,
        "annotation/study_list.html",
        {
            "studies": [(study, stages.get(study.pk, [])) for study in studies],
            "form": form,
            "implications": implications,
            "design": design,
            "saving_by_distance": saving_by_distance,
            "saving_conditions": saving_conditions,
            "min_forecast_items": MIN_FORECAST_ITEMS,
        },
    )


@researcher_required
@require_http_methods(["GET", "POST"])
def study_detail_view(request, pk: int):
    """Design, progress (per-annotator counts, control pass rates, live agreement), annotator
    access and actions. Revise answers with the page itself where its form has errors. Only the
    annotators on the roster of the study's project are listed and accepted."""
    study = _study_of_page(request, pk)
    if request.method == "GET":
        return _study_page(request, study)
    action = request.POST.get("action")
    if action == "publish":
        return _study_publish(request, study)
    if action == "revise":
        return _study_revise(request, study)
    if action in ("reject", "replace"):
        return _annotator_change(request, study, action)
    sync_job = ""
    with refusals(request):
        if action == "lock":
            upload = request.FILES.get("control_pool")
            pool = control_pool_from_upload(upload) if upload else None
            asked_at = timezone.now()
            study = study_lock(study=study, actor=request.user, control_pool=pool)
            messages.success(request, study_lock_message(study=study, asked_at=asked_at))
        elif action == "sync":
            queued = study_sync_queue(study=study)
            if isinstance(queued, EagerResult):  # no broker: it already ran, in this request
                messages.success(request, f"Synced: {sync_summary(queued.get())}.")
            else:
                sync_job = queued.id
                messages.success(request, "Sync queued: a worker runs it; this page shows when it has finished.")
        elif action == "validate":
            job = study_validation_start(study=study, actor=request.user)
            _job_outcome(request, job, started="Validation started: this page shows its progress.")
        elif action == "judge-outputs":
            jobs = study_judge_population_start(study=study, actor=request.user)
            messages.success(request, "The LLM judges score every output: " + judge_jobs_summary(jobs) + ".")
        elif action == "gate":
            results = study_gate(study=study, actor=request.user)
            messages.success(
                request,
                "Gate: " + ", ".join(f"{r.transformation} {gate_state_of(r.evidence).label}" for r in results),
            )
            return redirect("annotation:gate", pk=study.pk)
    url = reverse("annotation:study", args=[study.pk])
    return redirect(f"{url}?sync={sync_job}#sync-job" if sync_job else url)


def _job_outcome(request, job: StudyJob, *, started: str) -> None:
    """What a started job did, as a message: its summary or error where it has finished already (no
    broker: it ran in the request), else ``started``."""
    job.refresh_from_db()
    if job.status == StudyJob.Status.SUCCEEDED:
        messages.success(request, job.summary)
    elif job.status == StudyJob.Status.FAILED:
        messages.error(request, job.error)
    else:
        messages.success(request, started)


def _latest_jobs(study: Study) -> list[StudyJob]:
    """The newest validation and the newest publish of the study, for the page's job lines."""
    jobs = [study.jobs.filter(action=action).first() for action in StudyJob.Action]
    return [job for job in jobs if job is not None]


def _study_page(request, study: Study, **extra):
    design = study_design(study)
    # A prediction-powered gate's judge scores: read once, for its table and for the gate.
    populations = study_judge_populations(study=study) if design.prediction_powered else []
    sync_job = study_sync_job(study=study, task_id=request.GET.get("sync", "")) if request.GET.get("sync") else None
    progress = study_progress(study=study)
    links = {a.pk: annotator_ui_url(a) for a in study.annotators.select_related("study")}
    context = {
        "study": study,
        "design": design,
        "questions": QUESTIONS[design.kind],
        "progress": progress,
        "access": [(row, links.get(row.annotator.pk, "")) for row in progress.annotators],
        "annotator_users": project_annotators(study.project),
        "open_flags": flag_list(study=study).count(),
        "runs": study.runs.select_related("dataset"),
        "last_sync": sync_summary(study.last_sync) if study.last_sync else "",
        "sync_job": sync_job,
        "study_jobs": (study_jobs := _latest_jobs(study)),
        "jobs_unfinished": any(job.status in UNFINISHED for job in study_jobs),
        "detectability": study_control_detectability(study=study) if study.is_locked else None,
        "detectability_notes": study_detectability_notes(study) if study.is_locked else [],
        "adaptive": study_adaptive_rows(study=study, populations={p.transformation: p for p in populations}),
        "judge_populations": populations,
        "judges_incomplete": any(not p.complete for p in populations),
        "min_forecast_items": MIN_FORECAST_ITEMS,
        "revise_form": StudyDesignForm(base=design, prefix="revise"),
        **extra,
    }
    return render(request, "annotation/study_detail.html", context)


def _study_publish(request, study: Study):
    chosen = request.POST.getlist("annotators")
    users = project_annotators(study.project).filter(pk__in=[pk for pk in chosen if pk.isdigit()])
    with refusals(request) as refused:
        if len(users) != len(set(chosen)):  # an id of no annotator of this project: said alike for all
            raise ShiftlabError(roster_refusal(study.project, _outsiders(chosen, users)), field="annotators")
        job = study_publish_start(study=study, annotators=users, actor=request.user)
    if refused:
        return redirect(request.path)  # the page the form was on: the study's, or its publish step
    job.refresh_from_db()
    if job.status == StudyJob.Status.SUCCEEDED:  # no broker: it ran in the request
        publish_outcome(request, users, publish_job_result(job))
    else:
        _job_outcome(request, job, started="Publishing started: this page shows when it has finished.")
    return redirect("annotation:study", pk=study.pk)


def publish_outcome(request, users, result) -> None:
    """What a publish did, as messages (studies and baselines alike): to whom, the records their
    datasets hold, and the Argilla accounts made now; with nobody ticked, that nobody was added."""
    names = [u.get_username() for u in users]
    (messages.success if names else messages.info)(request, publish_summary(names, result.records))
    if result.new_accounts:
        messages.info(request, new_accounts_text(result.new_accounts))


@researcher_required
@require_http_methods(["GET", "POST"])
def study_publish_view(request, pk: int):
    """The step before publishing: a draft is locked first, after a confirmation that says it
    cannot be undone; then the researcher sees the items and controls drawn, and picks the
    annotators. Annotators never see this page (controls are marked on it)."""
    study = _study_of_page(request, pk)
    action = request.POST.get("action")
    if action == "publish":
        return _study_publish(request, study)
    if action == "lock":
        with refusals(request):
            upload = request.FILES.get("control_pool")
            pool = control_pool_from_upload(upload) if upload else None
            asked_at = timezone.now()
            study = study_lock(study=study, actor=request.user, control_pool=pool)
            what = study_lock_message(study=study, asked_at=asked_at)
            messages.success(request, f"{what} Check them below, then publish.")
        return redirect("annotation:publish", pk=study.pk)
    items = study.items.order_by("kind", "transformation", "position") if study.is_locked else []
    return render(
        request,
        "annotation/study_publish.html",
        {
            "study": study,
            "design": study_design(study),
            "items": items,
            "annotator_users": project_annotators(study.project),
            "chosen": set(study.annotators.values_list("user_id", flat=True)),
        },
    )


def _outsiders(chosen: list[str], users) -> list[str]:
    """The chosen user ids that name no annotator of the project, as "user #id": never their
    usernames, which would tell who exists elsewhere."""
    found = {str(u.pk) for u in users}
    return [f"user #{pk}" for pk in dict.fromkeys(chosen) if pk not in found]


def _new_accounts_message(request, usernames) -> None:
    if usernames:
        messages.info(request, new_accounts_text(usernames))


def _study_revise(request, study: Study):
    form = StudyDesignForm(request.POST, base=study_design(study), prefix="revise")
    if form.is_valid():
        with refusals(request, form):
            revised = study_revise(
                actor=request.user, request=StudyReviseRequest(study=study, design=form.design_values())
            )
            messages.success(request, f"New version {revised} created as a draft.")
            return redirect("annotation:study", pk=revised.pk)
    return _study_page(request, study, revise_form=form)


def _annotator_change(request, study: Study, action: str):
    annotator = get_object_or_404(Annotator, pk=request.POST.get("annotator"), study=study)
    reason = request.POST.get("reason", "")
    with refusals(request) as refused:
        if action == "reject":
            rejected = annotator_reject(annotator=annotator, detail=reason, actor=request.user)
            moved = rejected.release.summary() if rejected.release else "they had no items"
            messages.success(request, f"Rejected {annotator.user.get_username()}: {moved}.")
            return redirect("annotation:study", pk=study.pk)
        chosen = str(request.POST.get("user", ""))
        user = project_annotators(study.project).filter(pk=chosen).first() if chosen.isdigit() else None
        if user is None:
            raise ShiftlabError(roster_refusal(study.project, _outsiders([chosen], [])), field="user")
        replaced = annotator_replace(annotator=annotator, user=user, reason=reason, actor=request.user)
    if refused:
        return redirect("annotation:study", pk=study.pk)
    messages.success(
        request, f"{user.get_username()} replaces {annotator.user.get_username()}: {replaced.release.summary()}."
    )
    _new_accounts_message(request, replaced.new_accounts)
    return redirect("annotation:study", pk=study.pk)


@login_required
@require_http_methods(["GET", "POST"])
def my_argilla_view(request):
    """An annotator's own page: the studies they rate, each with its Argilla page, and the form that
    sets their Argilla password (their Shiftlab password asked again). Annotators only."""
    if not has_role(request.user, Role.ANNOTATOR) or request.user.is_superuser:
        raise PermissionDenied("Annotators only: this page sets the password of your own Argilla annotator account.")
    form = ArgillaPasswordForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with refusals(request, form):
            argilla_password_set_own(
                user=request.user,
                current_password=form.cleaned_data["current_password"],
                password=form.cleaned_data["password"],
                address=client_address(request),
            )
            messages.success(
                request, "Your Argilla password is set: sign in to Argilla with your username and this password."
            )
            return redirect("annotation:my-argilla")
    return render(
        request,
        "annotation/my_argilla.html",
        {"form": form, "studies": annotator_studies(request.user), "argilla_url": annotator_argilla_home()},
    )


@researcher_required
def review_queue_view(request, pk: int):
    """Open flags of a study: confirm or dismiss each; translate non-English items to English."""
    study = _study_of_page(request, pk)
    if request.method == "POST":
        flag = get_object_or_404(Flag, pk=request.POST.get("flag"), rating__study_item__study=study)
        with refusals(request):
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
    study = _study_of_page(request, pk)
    if request.method == "POST":
        result = get_object_or_404(GateResult, pk=request.POST.get("gate_result"), study=study)
        with refusals(request):
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
    """Exported benchmark configs, and a button exporting every approved transformation of one
    project (the chosen one, or the only one the caller may change that has approvals)."""
    writable = projects_writable(request.user).order_by("slug")
    if request.method == "POST":
        # A project the caller cannot read: 404; one they may only read: 403 (core.pages.refusals).
        with refusals(request) as refused:
            asked = BenchmarkConfigExportRequest(
                project=request.POST.get("project") or None,
                name=request.POST.get("name", "").strip(),
                **_export_perturbation(request.POST),
            )
            config = benchmark_config_export(actor=request.user, request=asked)
        if refused:  # the form comes back with the choices it was sent, for the user to mend
            kept = {key: request.POST.getlist(key) for key in ("project", "name", "sides", "document_scope")}
            return redirect(f"{reverse('annotation:exports')}?{urlencode(kept, doseq=True)}")
        messages.success(request, f"Exported config {config.config_hash[:12]} of project {config.project}.")
        return redirect("annotation:exports")
    configs = scoped(benchmark_config_list(), request.user)[:100]
    preview = _export_preview(request) if request.GET.get("preview") else None
    perturbation = _export_perturbation(request.GET)  # kept ticked on the Preview and after a refusal
    return render(
        request,
        "annotation/exports.html",
        {
            "configs": configs,
            "projects": writable,
            "preview": preview,
            "chosen": request.GET.get("project", ""),
            "chosen_name": request.GET.get("name", ""),
            "sides": [(side, side in (perturbation["sides"] or ())) for side in PERTURBATION_SIDES],
            "scopes": PERTURBATION_DOCUMENT_SCOPES,
            "chosen_scope": perturbation["document_scope"] or "",
        },
    )


def _export_perturbation(data) -> dict:
    """The perturbed sides and documents rewritten the export form asks for, as given: the
    service checks them (none ticked and no scope chosen: the config has no perturbation block)."""
    return {"sides": data.getlist("sides") or None, "document_scope": data.get("document_scope") or None}


def _export_preview(request) -> dict | None:
    """What Export would write for the project chosen (issue 31), with the perturbation block
    chosen (issue 30): shown before anything is written."""
    with refusals(request) as refused:
        asked = BenchmarkConfigExportRequest(
            project=request.GET.get("project") or None, **_export_perturbation(request.GET)
        )
        document, owner = benchmark_config_preview(actor=request.user, request=asked)
    if refused:
        return None
    return {"document": document, "project": owner, "yaml": config_render(document, "yaml")}


@researcher_required
def export_download_view(request, pk: int, fmt: str):
    config = get_object_or_404(scoped(benchmark_config_list(), request.user), pk=pk)
    if fmt not in ("json", "yaml"):
        # A fixed text: the path segment is never echoed (it would be reflected into the page).
        return HttpResponse("unknown format: use json or yaml", status=404, content_type="text/plain; charset=utf-8")
    return benchmark_config_response(config, fmt)


@researcher_required
def study_annotators_view(request, pk: int):
    """Annotator quality of a study, computed now from its ratings: a table and three figures."""
    study = _readable_study(request, pk)
    report = study_annotator_quality(study=study)
    return render(
        request,
        "annotation/study_annotators.html",
        {"study": study, "design": study_design(study), "report": report, "figures": quality_figures(report)},
    )
