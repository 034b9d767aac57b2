"""The project page's "Control sources" section (``core.project_sections``; named in
``settings.PROJECT_PAGE_SECTIONS``): the shared datasets of other projects a project trusts for its
control items, and, for its owners and admins, the shared datasets they may trust."""

from django.contrib import messages
from django.db.models import Q
from django.shortcuts import get_object_or_404, redirect

from core.pages import refusals
from core.project_sections import ProjectSection
from corpora.models import Dataset
from corpora.selectors import control_trust_list, untrusted_shared_datasets
from corpora.services import dataset_trust_for_controls


def _control_sources_context(request, project, manager: bool) -> dict:
    return {
        "control_trusts": control_trust_list(project),
        "untrusted_shared": untrusted_shared_datasets(project).select_related("project").order_by("name")[:50],
    }


def _control_trust_post(request, project):
    """Trust a shared dataset of another project for this project's control items, or stop (owners
    and admins; ``corpora.services.dataset_trust_for_controls`` audits it)."""
    dataset = get_object_or_404(
        Dataset.objects.select_related("project")
        .exclude(project=project)
        .filter(Q(shared=True) | Q(control_trusts__project=project))
        .distinct(),
        pk=request.POST.get("dataset"),
    )
    trusted = request.POST.get("trusted") == "1"
    with refusals(request):
        dataset_trust_for_controls(actor=request.user, project=project, dataset=dataset, trusted=trusted)
        where = f"{dataset.name} of {dataset.project.slug}"
        messages.success(
            request,
            f"{project.slug} now draws control items from {where} too."
            if trusted
            else f"{project.slug} no longer draws control items from {where}.",
        )
    return redirect("project", slug=project.slug)


control_sources = ProjectSection(
    template="corpora/_project_control_sources.html",
    action="control_trust",
    context=_control_sources_context,
    post=_control_trust_post,
)
