"""Pages of human baselines: the list with the form that declares one, and each study's page,
where a researcher of its project finishes it without a command line: publish to annotators,
let an LLM answer and score models (background jobs whose progress the page shows), sync the
answers, close.
Thin: each POST calls one service entry and says its outcome as a message."""

from celery.result import EagerResult
from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotation.baselines.baseline_llm_services import baseline_llm_job_start
from annotation.baselines.baseline_publish_job_services import baseline_publish_job_text, baseline_publish_start
from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_close, baseline_create
from annotation.baselines.baseline_sync_services import baseline_sync_job, baseline_sync_queue, baseline_sync_summary
from annotation.models import BaselineLLMJob, BaselinePublishJob, BaselineStudy
from core.errors import ShiftlabError
from core.pages import refusals
from core.projects import project_can_write, project_require_write, scoped
from core.rosters import project_annotators, roster_refusal
from core.views import researcher_required
from evaluation.baseline_services import baseline_report_build, baseline_score_job_scores, baseline_score_start
from evaluation.encoders import encoder_aliases
from evaluation.forms import BaselineCreateForm, LLMAnnotateForm
from evaluation.models import BaselineScoreJob
from evaluation.selectors import baseline_study_list

CHANGES = ("publish", "sync", "close")  # the POST actions that change the study, besides llm-annotate


@researcher_required
@require_http_methods(["GET", "POST"])
def baseline_list_view(request):
    """The human baseline studies the caller may read, and the form that declares one in a project."""
    form = BaselineCreateForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        inputs = {name: form.cleaned_data[name] for name in form.INPUTS}
        with refusals(request, form):  # a read-only project: 403, as the API and the command refuse it
            study = baseline_create(actor=request.user, request=BaselineCreateRequest(options=form.options(), **inputs))
            messages.success(request, f"Baseline study {study.name}: {study.instances.count()} instances drawn.")
            return redirect("evaluation:baseline", pk=study.pk)
    studies = baseline_study_list(user=request.user)[:200]
    return render(request, "evaluation/baseline_list.html", {"studies": studies, "form": form})


@researcher_required
def baseline_detail_view(request, pk: int):
    """Humans and LLM annotators ranked on a baseline study; models join the ranking once scored
    (POST "Score models" starts a background job on the encode queue, whose progress the page
    shows in place; the scores change nothing of the study, so viewers may ask too). Publishing,
    syncing, closing and an LLM's answers change the study: only the study's project's owners and
    members may ask for them."""
    study = get_object_or_404(baseline_study_list(user=request.user), pk=pk)
    action = request.POST.get("action", "")
    llm_form = LLMAnnotateForm(request.POST if action == "llm-annotate" else None)
    if llm_form.is_bound or action in CHANGES:
        project_require_write(request.user, study.project)
    if action in CHANGES:
        sync_job = _baseline_change(request, study, action)
        url = reverse("evaluation:baseline", args=[study.pk])
        return redirect(f"{url}?sync={sync_job}#sync-job" if sync_job else url)
    if llm_form.is_bound and llm_form.is_valid():
        with refusals(request, llm_form):
            job = baseline_llm_job_start(
                study=study, backend_alias=llm_form.cleaned_data["backend"], actor=request.user
            )
            job.refresh_from_db()
            if job.status == BaselineLLMJob.Status.SUCCEEDED:  # no broker: it ran in this request
                messages.success(request, job.summary)
            elif job.status == BaselineLLMJob.Status.FAILED:
                messages.error(request, job.error)
            return redirect("evaluation:baseline", pk=study.pk)
    if request.method == "POST" and not llm_form.is_bound:  # "Score models"
        with refusals(request):
            job = baseline_score_start(
                study=study, models=request.POST.get("models", "").replace(",", " ").split(), actor=request.user
            )
            job.refresh_from_db()
            if job.status == BaselineScoreJob.Status.FAILED:  # no broker: it ran in this request
                messages.error(request, job.error)
            elif job.status != BaselineScoreJob.Status.SUCCEEDED:
                messages.success(request, "Scoring started: this page ranks the models once they are scored.")
        return redirect("evaluation:baseline", pk=study.pk)
    score_job = study.score_jobs.first()
    scored = baseline_score_job_scores(score_job) if score_job else ()
    report = None
    with refusals(request, show=False) as refused:  # no report yet: the page says why
        report = baseline_report_build(study=study, model_scores=scored)
    error = refused.message or None
    return render(
        request,
        "evaluation/baseline_detail.html",
        {
            "study": study,
            "report": report,
            "error": error,
            "models": " ".join(score_job.model_names) if score_job else (encoder_aliases() or [""])[0],
            "encoders": encoder_aliases(),
            "score_job": score_job,
            "score_job_line": score_job_text(score_job) if score_job else "",
            "llm_form": llm_form,
            "llm_job": (job := study.llm_jobs.first()),
            "llm_job_line": llm_job_text(job) if job else "",
            "publish_job": (publish_job := study.publish_jobs.first()),
            "publish_job_line": baseline_publish_job_text(publish_job) if publish_job else "",
            "sync_job": baseline_sync_job(study=study, task_id=sync) if (sync := request.GET.get("sync")) else None,
            "can_change": project_can_write(request.user, study.project),
            "annotator_users": project_annotators(study.project),
            "chosen": set(study.annotators.values_list("pk", flat=True)),
        },
    )


def score_job_text(job: BaselineScoreJob) -> str:
    """One line on the newest scoring of models, as the page shows it."""
    names = ", ".join(job.model_names)
    if job.status == BaselineScoreJob.Status.PENDING:
        return f"Scoring {names} is queued: waiting for a worker (this page updates itself)."
    if job.status == BaselineScoreJob.Status.RUNNING:
        return f"Scoring {names}: {job.done} of {job.total} models scored (this page updates itself)."
    if job.status == BaselineScoreJob.Status.SUCCEEDED:
        return f"Scored {names} {job.finished_at:%Y-%m-%d %H:%M}: ranked above among the humans."
    return f"Scoring {names} stopped: {job.error}"


def _baseline_change(request, study, action: str) -> str:
    """Publish, sync or close, with the outcome (or the refusal) as a message; the id of a queued
    sync ("" otherwise), which the page then follows."""
    with refusals(request):
        if action == "publish":
            _baseline_publish(request, study)
        elif action == "sync":
            queued = baseline_sync_queue(study=study, actor=request.user)
            if isinstance(queued, EagerResult):  # no broker: it already ran, in this request
                messages.success(request, f"Synced: {baseline_sync_summary(queued.get())}.")
            else:
                messages.success(request, "Sync queued: a worker runs it; this page shows when it has finished.")
                return queued.id
        elif request.POST.get("final") != "yes":
            raise ShiftlabError("Tick the box that says the answers become final, then close the study", field="final")
        else:
            baseline_close(study=study, actor=request.user)
            messages.success(request, f"Closed {study}: its answers are final and its report no longer changes.")
    return ""


def _baseline_publish(request, study) -> None:
    chosen = request.POST.getlist("annotators")
    users = list(project_annotators(study.project).filter(pk__in=[pk for pk in chosen if pk.isdigit()]))
    if len(users) != len(set(chosen)):  # an id of no annotator of this project: said alike for all
        found = {str(u.pk) for u in users}
        outsiders = [f"user #{pk}" for pk in chosen if pk not in found]
        raise ShiftlabError(roster_refusal(study.project, outsiders), field="annotators")
    job = baseline_publish_start(study=study, annotators=users, actor=request.user)
    job.refresh_from_db()
    if job.status == BaselinePublishJob.Status.SUCCEEDED:  # no broker: it ran in this request
        messages.success(request, job.summary)
    elif job.status == BaselinePublishJob.Status.FAILED:
        messages.error(request, job.error)
    else:
        messages.success(request, "Publishing started: this page shows when the annotators' datasets are ready.")


@researcher_required
def baseline_llm_progress_view(request, pk: int):
    """The newest LLM job of a baseline study as JSON, for the page's progress line (polled while
    the job runs; the page itself never reloads on a timer)."""
    # Polled every 1.5 s: the access check only, not the list's per-study counts.
    study = get_object_or_404(scoped(BaselineStudy.objects.all(), request.user), pk=pk)
    job = study.llm_jobs.first()
    if job is None:
        return JsonResponse({"status": "none"})
    return JsonResponse(
        {
            "status": job.status,
            "done": job.done,
            "total": job.total,
            "text": llm_job_text(job),
            "finished": job.status not in (BaselineLLMJob.Status.PENDING, BaselineLLMJob.Status.RUNNING),
        }
    )


def llm_job_text(job: BaselineLLMJob) -> str:
    """One line on an LLM job, as the page shows it and the progress endpoint sends it."""
    if job.status == BaselineLLMJob.Status.PENDING:
        return f"The LLM ({job.backend_alias}) is queued: waiting for a worker."
    if job.status == BaselineLLMJob.Status.RUNNING:
        return f"The LLM ({job.backend_alias}) is answering: {job.done} of {job.total} instances done."
    if job.status == BaselineLLMJob.Status.SUCCEEDED:
        return f"The LLM ({job.backend_alias}) finished: {job.summary}"
    return f"The LLM ({job.backend_alias}) stopped: {job.error}"
