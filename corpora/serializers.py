from rest_framework import serializers

from corpora.models import Dataset, DatasetImport, DatasetItem
from corpora.readers import FORMATS
from corpora.task_types import TaskType


class DatasetSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

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
            "created_by",
            "created_at",
        ]
        read_only_fields = fields


class DatasetItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = DatasetItem
        fields = ["item_id", "split", "kind", "position", "payload", "gold", "language", "text_hashes", "content_hash"]
        read_only_fields = fields


class DatasetImportSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = DatasetImport
        fields = [
            "id",
            "name",
            "task_type",
            "options",
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
    files = serializers.ListField(child=serializers.FileField(), allow_empty=False)
    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100)
    task_type = serializers.ChoiceField(choices=[t.value for t in TaskType])
    language = serializers.CharField(max_length=16, default="en")
    format = serializers.ChoiceField(choices=[f for f in FORMATS if f != "hf"], required=False)
    columns = serializers.ListField(child=serializers.CharField(), required=False)
    split = serializers.CharField(max_length=32, required=False)
    field_map = serializers.DictField(child=serializers.CharField(), required=False)
