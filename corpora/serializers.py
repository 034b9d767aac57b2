from rest_framework import serializers

from core.serializers import project_slug_field, username_field
from corpora.models import Dataset, DatasetImport, DatasetItem
from corpora.readers import FORMATS
from corpora.task_types import TaskType


class DatasetSerializer(serializers.ModelSerializer):
    created_by = username_field()
    project = project_slug_field()

    class Meta:
        model = Dataset
        fields = [
            "id",
            "name",
            "task_type",
            "description",
            "languages",
            "splits",
            "source",
            "source_format",
            "content_hash",
            "n_items",
            "metadata",
            "project",
            "shared",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields


class DatasetShareSerializer(serializers.Serializer):
    shared = serializers.BooleanField(
        default=True, help_text="true: every project's researchers may read and use it; false: its project only."
    )


class DatasetItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = DatasetItem
        fields = ["item_id", "split", "kind", "position", "payload", "gold", "language", "text_hashes", "content_hash"]
        read_only_fields = fields


class DatasetImportSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    project = project_slug_field()

    class Meta:
        model = DatasetImport
        fields = [
            "id",
            "name",
            "task_type",
            "options",
            "project",
            "status",
            "error",
            "attempts",
            "dataset",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class DatasetImportCreateSerializer(serializers.Serializer):
    project = serializers.SlugField(
        max_length=61,
        required=False,
        help_text="Slug of the project to import into (default: your only project, else the default one).",
    )
    files = serializers.ListField(child=serializers.FileField(), allow_empty=False, required=False)
    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100, required=False)
    task_type = serializers.ChoiceField(choices=[t.value for t in TaskType], required=False)
    # An MTEB task by name instead of files (issue 17): its data comes from the server's local copy
    # (SHIFTLAB_MTEB_DATA_DIR) or the hub; its task type and name default to MTEB's.
    mteb_task = serializers.CharField(max_length=200, required=False, help_text="e.g. STSBenchmark")
    mteb_subset = serializers.CharField(max_length=64, required=False, help_text="e.g. en-de (multilingual tasks)")
    language = serializers.CharField(max_length=16, default="en")
    format = serializers.ChoiceField(choices=[f for f in FORMATS if f != "hf"], required=False)
    columns = serializers.ListField(child=serializers.CharField(), required=False)
    split = serializers.CharField(max_length=32, required=False)
    field_map = serializers.DictField(child=serializers.CharField(), required=False)

    def validate(self, data: dict) -> dict:
        if data.get("mteb_task"):
            if data.get("files"):
                raise serializers.ValidationError('Send either "files" or "mteb_task", not both.')
            return data
        missing = [name for name in ("files", "name", "task_type") if not data.get(name)]
        if missing:
            raise serializers.ValidationError(
                {name: 'This field is required (or send "mteb_task").' for name in missing}
            )
        return data
