from django.db.models import QuerySet

from corpora.models import Dataset, DatasetImport, DatasetItem


def dataset_list(*, task_type: str | None = None) -> QuerySet[Dataset]:
    datasets = Dataset.objects.select_related("created_by")
    if task_type:
        datasets = datasets.filter(task_type=task_type)
    return datasets


def dataset_get(*, name: str) -> Dataset:
    return Dataset.objects.get(name=name)


def dataset_item_list(*, dataset: Dataset, split: str | None = None, kind: str | None = None) -> QuerySet[DatasetItem]:
    items = dataset.items.order_by("position")
    if split:
        items = items.filter(split=split)
    if kind:
        items = items.filter(kind=kind)
    return items


def dataset_import_list(*, limit: int = 20) -> QuerySet[DatasetImport]:
    return DatasetImport.objects.select_related("dataset", "created_by")[:limit]
