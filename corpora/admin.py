from django.contrib import admin

from core.admin import ReadOnlyAdmin
from corpora.models import ControlTrust, Dataset, DatasetImport, DatasetItem


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "shared", "task_type", "n_items", "languages", "created_at")
    list_filter = ("project", "shared", "task_type")
    search_fields = ("name", "description", "source")
    readonly_fields = ("content_hash", "n_items", "splits", "languages", "source", "source_format", "created_at")


@admin.register(DatasetItem)
class DatasetItemAdmin(admin.ModelAdmin):
    list_display = ("dataset", "split", "kind", "item_id", "language")
    list_filter = ("kind", "split", "dataset")
    search_fields = ("item_id",)
    raw_id_fields = ("dataset",)
    readonly_fields = ("content_hash", "text_hashes")


@admin.register(DatasetImport)
class DatasetImportAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "task_type", "status", "created_by", "created_at", "finished_at")
    list_filter = ("project", "status", "task_type")
    readonly_fields = ("error", "started_at", "finished_at")


# Trust for controls changes on the project page or with `manage.py corpora trust`, where each
# change is audited in the trusting project; the admin site only shows it.
@admin.register(ControlTrust)
class ControlTrustAdmin(ReadOnlyAdmin):
    list_display = ("project", "dataset", "granted_by", "granted_at")
    list_filter = ("project",)
