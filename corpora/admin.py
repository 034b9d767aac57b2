from django.contrib import admin

from corpora.models import Dataset, DatasetImport, DatasetItem


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
