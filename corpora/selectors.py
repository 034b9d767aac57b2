from django.db.models import QuerySet

from core.selectors import filter_given
from corpora.models import Dataset, DatasetImport, DatasetItem


def dataset_list(*, task_type: str | None = None) -> QuerySet[Dataset]:
    return filter_given(Dataset.objects.select_related("created_by"), task_type=task_type)


def dataset_get(*, name: str) -> Dataset:
    return Dataset.objects.get(name=name)


def dataset_item_list(*, dataset: Dataset, split: str | None = None, kind: str | None = None) -> QuerySet[DatasetItem]:
    return filter_given(dataset.items.order_by("position"), split=split, kind=kind)


def dataset_import_list(*, limit: int = 20) -> QuerySet[DatasetImport]:
    return DatasetImport.objects.select_related("dataset", "created_by")[:limit]
