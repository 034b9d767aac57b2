from pathlib import PurePath

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from core.pages import refusals
from core.projects import project_can_write, project_require_write
from core.views import researcher_required
from corpora.forms import DatasetUploadForm, MtebImportForm
from corpora.models import Dataset, DatasetImport
from corpora.mteb_services import dataset_import_mteb
from corpora.selectors import dataset_get, dataset_import_list, dataset_item_list, dataset_list
from corpora.services import (
    ImportOptions,
    dataset_delete,
    dataset_import_job_create,
    dataset_share_set,
)


@researcher_required
@require_http_methods(["GET", "POST"])
def dataset_list_view(request):
    """Datasets, and the upload form; ``?again=<import id>`` fills the form with that import's
    settings. A refused import shows the form again as it was sent (files must be chosen anew).
    Both forms import into the project chosen in their project field."""
    user = request.user
    again = request.GET.get("again", "")
    initial = (
        DatasetUploadForm.initial_from(get_object_or_404(dataset_import_list(user=user, limit=None), pk=again))
        if again.isdigit()
        else None
    )
    mteb = request.method == "POST" and request.POST.get("action") == "mteb"
    form = DatasetUploadForm(None if mteb else request.POST or None, request.FILES or None, initial=initial, user=user)
    mteb_form = MtebImportForm(request.POST if mteb else None, user=user)
    if mteb and mteb_form.is_valid():
        response = _import_mteb(request, mteb_form)
    elif request.method == "POST" and not mteb and form.is_valid():
        response = _import_upload(request, form)
    else:
        response = None
    return response or render(
        request,
        "corpora/list.html",
        {
            "datasets": dataset_list(user=user),
            "imports": dataset_import_list(user=user, limit=10),
            "form": form,
            "mteb_form": mteb_form,
        },
    )


def _import_mteb(request, form: MtebImportForm):
    data = form.cleaned_data
    dataset = _imported(
        request,
        form,
        dataset_import_mteb,
        task_name=data["task_name"],
        subset=data["subset"] or None,
        name=data["name"] or None,
        interface="page",
    )
    if dataset is None:
        return None
    messages.success(request, f"Imported {dataset.n_items} items of MTEB's {data['task_name']} into {dataset.name}.")
    return redirect("corpora:detail", name=dataset.name)


def _import_upload(request, form: DatasetUploadForm):
    data = form.cleaned_data
    inputs = {"files": data["files"], "task": data["task"], "name": data["name"]}
    job = _imported(
        request, form, dataset_import_job_create, **inputs, options=ImportOptions.from_input(data, interface="page")
    )
    if job is None:
        return None
    if job.status == DatasetImport.Status.SUCCEEDED:
        messages.success(request, f"Imported {job.dataset.n_items} items into {job.name}.")
        return redirect("corpora:list")
    if job.status != DatasetImport.Status.FAILED:
        return redirect("corpora:import", pk=job.pk)
    # No broker: the import already ran and failed; keep what was entered.
    form.add_error(None, f"Nothing was imported. Fix the file, choose it again and import:\n{job.error}")
    return None


def _imported(request, form, service, **inputs):
    """``service``'s result for the caller and the form's project, or None with the refusal on the form."""
    with refusals(request, form):
        return service(actor=request.user, project=form.cleaned_data["project"], **inputs)
    return None


@researcher_required
def dataset_import_view(request, pk: int):
    job = get_object_or_404(dataset_import_list(user=request.user, limit=None), pk=pk)
    return render(request, "corpora/import.html", {"job": job})


@researcher_required
def dataset_detail_view(request, name: str):
    dataset = _dataset_or_404(request, name)
    split = request.GET.get("split") or None
    page = Paginator(dataset_item_list(dataset=dataset, split=split), 25).get_page(request.GET.get("page"))
    return render(
        request,
        "corpora/detail.html",
        {
            "dataset": dataset,
            "page": page,
            "split": split,
            "source": dataset_source_name(dataset),
            "can_change": project_can_write(request.user, dataset.project),
        },
    )


def dataset_source_name(dataset: Dataset) -> str:
    """The hub id, or the file or folder name the dataset came from: never a path on the server
    (datasets imported before uploads recorded their file names hold one)."""
    return dataset.source if dataset.source_format == "hf" else PurePath(dataset.source).name


@researcher_required
@require_http_methods(["GET", "POST"])
def dataset_delete_view(request, name: str):
    """GET asks for confirmation; POST deletes, or explains what still uses the dataset. Only
    those who may change the dataset's project get either (403 for readers)."""
    dataset = _dataset_or_404(request, name)
    project_require_write(request.user, dataset.project)
    if request.method == "GET":
        return render(request, "corpora/delete.html", {"dataset": dataset})
    with refusals(request) as refused:  # still in use: said on the dataset's page
        dataset_delete(dataset=dataset, actor=request.user)
    if refused:
        return redirect("corpora:detail", name=name)
    messages.success(request, f"Deleted {name}.")
    return redirect("corpora:list")


@researcher_required
@require_http_methods(["POST"])
def dataset_share_view(request, name: str):
    """Share the dataset with every project (``shared=1``) or stop sharing it (``shared=0``)."""
    dataset = _dataset_or_404(request, name)
    shared = request.POST.get("shared") == "1"
    dataset_share_set(dataset=dataset, shared=shared, actor=request.user)  # 403 for read-only callers
    if shared:
        messages.success(request, f"{name} is shared: researchers of every project may read it and use it.")
    else:
        messages.success(request, f"{name} is no longer shared: only its project ({dataset.project.slug}) reads it.")
    return redirect("corpora:detail", name=name)


def _dataset_or_404(request, name: str):
    """The dataset ``name`` the caller may read (``?project=SLUG`` picks one of two of that name)."""
    with refusals(request, show=False) as refused:  # several: add ?project=SLUG
        dataset = dataset_get(name=name, user=request.user, project=request.GET.get("project") or None)
    if refused:
        raise Http404(refused.message)
    return dataset
