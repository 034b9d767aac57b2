from django.db.models import Q, QuerySet

from core.errors import NotFoundError, ShiftlabError
from core.models import Project
from core.projects import User, project_resolve, projects_writable, scoped
from core.selectors import filter_given
from corpora.models import ControlTrust, Dataset, DatasetImport, DatasetItem


class DatasetNotFound(NotFoundError, Dataset.DoesNotExist):
    """No dataset of that name that the caller may read: a ``NotFoundError`` (404) that callers
    which ask the ORM's question (``Dataset.DoesNotExist``) catch too."""


# ``user``: who asks. They get what they may read (core.projects.scoped: their projects' datasets
# and the shared ones); None is the system (tasks, commands run without --as), which reads all.


def dataset_list(*, user: User = None, task_type: str | None = None, project: str | None = None) -> QuerySet[Dataset]:
    """Datasets ``user`` may read, optionally of one task type or one project (by slug)."""
    datasets = scoped(Dataset.objects.select_related("created_by", "project"), user)
    return filter_given(datasets, task_type=task_type, project__slug=project)


def dataset_usable_list(*, user: User = None, project: str | None = None) -> QuerySet[Dataset]:
    """The datasets ``user`` may take as the input of something new in ``project`` (a slug; None:
    the inputs' project, else their own), as the services that make it accept them (``dataset_get``
    finds the dataset, ``core.projects.project_for_new`` and ``project_require_same`` admit it):
    those of the project, or of every project ``user`` may change when none is named, and the
    shared ones ``user`` may read. Unnamed, a shared dataset goes into the caller's own project,
    so it is usable only when they have one (``project_resolve``). Forms offer exactly these."""
    writable = projects_writable(user) if user is not None else Project.objects.all()
    usable = Q(project__in=writable.filter(slug=project) if project else writable)
    if project:
        usable |= Q(shared=True)
    else:
        try:
            project_resolve(user)
        except ShiftlabError:  # several projects of their own: a shared dataset needs one named
            pass
        else:
            usable |= Q(shared=True)
    return dataset_list(user=user).filter(usable)


def dataset_get(*, name: str, user: User = None, project: Project | str | None = None) -> Dataset:
    """The dataset ``name`` among those ``user`` may read; ``DatasetNotFound`` (a
    ``Dataset.DoesNotExist``) when there is none (also when ``user`` may not read it).

    Names are unique per project, so a reader of several projects (or of a shared dataset) may see
    one name twice: ``project`` (a Project or its slug) picks that project's dataset, else a shared
    one (else whichever it is); without it a project's own dataset is preferred over shared ones. When several remain,
    a ``ShiftlabError`` names their projects (all readable by ``user``) and asks for one."""
    found = list(dataset_list(user=user).filter(name=name)[:20])
    if project is not None:
        slug = project if isinstance(project, str) else project.slug
        # Else the one of another project, whose refusal (project_require_same) says whose it is.
        found = [d for d in found if d.project.slug == slug] or [d for d in found if d.shared] or found
    if len(found) > 1 and len(own := [d for d in found if not d.shared]) == 1:
        found = own
    if not found:
        raise DatasetNotFound(f"no dataset {name!r}", field="dataset")
    if len(found) > 1:
        raise ShiftlabError(
            f"several datasets you can read are named {name!r} (in projects "
            f"{', '.join(sorted(d.project.slug for d in found))}): name the project too"
        )
    return found[0]


def dataset_item_list(*, dataset: Dataset, split: str | None = None, kind: str | None = None) -> QuerySet[DatasetItem]:
    """Items of ``dataset``, which the caller got through a scoped query (its items follow it)."""
    return filter_given(dataset.items.order_by("position"), split=split, kind=kind)


def dataset_import_list(*, user: User = None, limit: int | None = 20) -> QuerySet[DatasetImport]:
    """The latest import jobs of the projects ``user`` may read."""
    jobs = scoped(DatasetImport.objects.select_related("dataset", "created_by", "project"), user)
    return jobs[:limit] if limit is not None else jobs


def control_source_datasets(project: Project | int) -> QuerySet[Dataset]:
    """Datasets that may supply ``project``'s control items: its own, and shared datasets of other
    projects that it chose to trust (``corpora.services.dataset_trust_for_controls``). Sharing alone
    is not enough, and a trust counts only while the dataset stays shared."""
    pk = project if isinstance(project, int) else project.pk
    return Dataset.objects.filter(Q(project_id=pk) | Q(shared=True, control_trusts__project_id=pk)).distinct()


def control_trust_list(project: Project) -> QuerySet[ControlTrust]:
    """The shared datasets ``project`` trusts for controls, with who granted each."""
    return ControlTrust.objects.filter(project=project).select_related("dataset__project", "granted_by")


def untrusted_shared_datasets(project: Project | int) -> QuerySet[Dataset]:
    """Shared datasets of other projects that ``project`` has not trusted for controls."""
    pk = project if isinstance(project, int) else project.pk
    return Dataset.objects.filter(shared=True).exclude(project_id=pk).exclude(control_trusts__project_id=pk)
