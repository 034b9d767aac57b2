from django.db.models import QuerySet

from core.projects import User, scoped
from core.selectors import filter_given
from corpora.models import Dataset, DatasetImport, DatasetItem

# ``user``: who asks. They get what they may read (core.projects.scoped: their projects' datasets
# and the shared ones); None is the system (tasks, commands run without --as), which reads all.


def dataset_list(*, user: User = None, task_type: str | None = None, project: str | None = None) -> QuerySet[Dataset]:
    """Datasets ``user`` may read, optionally of one task type or one project (by slug)."""
    datasets = scoped(Dataset.objects.select_related("created_by", "project"), user)
    return filter_given(datasets, task_type=task_type, project__slug=project)


def dataset_get(*, name: str, user: User = None) -> Dataset:
    """The dataset ``name``; ``Dataset.DoesNotExist`` also when ``user`` may not read it."""
    return dataset_list(user=user).get(name=name)


def dataset_item_list(*, dataset: Dataset, split: str | None = None, kind: str | None = None) -> QuerySet[DatasetItem]:
    """Items of ``dataset``, which the caller got through a scoped query (its items follow it)."""
    return filter_given(dataset.items.order_by("position"), split=split, kind=kind)


def dataset_import_list(*, user: User = None, limit: int | None = 20) -> QuerySet[DatasetImport]:
    """The latest import jobs of the projects ``user`` may read."""
    jobs = scoped(DatasetImport.objects.select_related("dataset", "created_by", "project"), user)
    return jobs[:limit] if limit is not None else jobs
