from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from core.permissions import IsResearcher
from core.projects import project_require_write
from core.serializers import valid_input
from corpora.models import Dataset
from corpora.mteb_services import dataset_import_mteb
from corpora.selectors import dataset_get, dataset_import_list, dataset_item_list, dataset_list
from corpora.serializers import (
    DatasetImportCreateSerializer,
    DatasetImportSerializer,
    DatasetItemSerializer,
    DatasetSerializer,
    DatasetShareSerializer,
)
from corpora.services import ImportOptions, dataset_delete, dataset_import_job_create, dataset_share_set


class DatasetViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """Imported datasets, by name: those of your projects and the shared ones (others answer 404).
    Create them with POST /api/dataset-imports/; deleting and sharing need a writable project (403)."""

    permission_classes = [IsResearcher]
    serializer_class = DatasetSerializer
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9][A-Za-z0-9._-]*"

    def get_queryset(self):
        params = self.request.query_params
        return dataset_list(user=self.request.user, task_type=params.get("task_type"), project=params.get("project"))

    def get_object(self):
        """By name; ``?project=SLUG`` picks one of two datasets of that name (names are unique per project)."""
        try:
            dataset = dataset_get(
                name=self.kwargs["name"], user=self.request.user, project=self.request.query_params.get("project")
            )
        except Dataset.DoesNotExist:
            raise NotFound(f"no dataset {self.kwargs['name']!r}") from None
        self.check_object_permissions(self.request, dataset)
        return dataset

    @extend_schema(responses={204: None, 403: None, 409: None})
    def destroy(self, request, name=None):
        """Delete a dataset and its items; 409 while runs, results or studies still use it."""
        dataset = self.get_object()
        project_require_write(request.user, dataset.project)
        dataset_delete(dataset=dataset, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=DatasetItemSerializer(many=True))
    @action(detail=True, methods=["get"])
    def items(self, request, name=None):
        items = dataset_item_list(
            dataset=self.get_object(), split=request.query_params.get("split"), kind=request.query_params.get("kind")
        )
        page = self.paginate_queryset(items)
        return self.get_paginated_response(DatasetItemSerializer(page, many=True).data)

    @extend_schema(request=DatasetShareSerializer, responses={200: DatasetSerializer, 403: None})
    @action(detail=True, methods=["post"])
    def share(self, request, name=None):
        """Share the dataset with every project (``{"shared": true}``) or stop sharing it (false)."""
        data = valid_input(DatasetShareSerializer, request)
        dataset = dataset_share_set(dataset=self.get_object(), shared=data["shared"], actor=request.user)
        return Response(DatasetSerializer(dataset).data)


class DatasetImportViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Upload files to import; the import runs as a Celery task. Poll the job for its status. Jobs
    of projects you may not read answer 404."""

    permission_classes = [IsResearcher]
    serializer_class = DatasetImportSerializer
    parser_classes = [MultiPartParser, FormParser]

    def get_queryset(self):
        return dataset_import_list(user=self.request.user, limit=None)

    @extend_schema(
        request=DatasetImportCreateSerializer,
        responses={202: DatasetImportSerializer, 201: DatasetSerializer, 400: None, 413: None},
        description="Upload files (queued import, 202), or name an MTEB task with mteb_task (imported at once, 201).",
    )
    def create(self, request):
        data = valid_input(DatasetImportCreateSerializer, request)
        if data.get("mteb_task"):
            # Runs in the request (no upload to hand to a worker): with a local copy of the task's data
            # (SHIFTLAB_MTEB_DATA_DIR) this takes seconds; import large tasks with `corpora import --mteb`.
            dataset = dataset_import_mteb(
                actor=request.user,
                project=data.get("project"),
                task_name=data["mteb_task"],
                subset=data.get("mteb_subset"),
                name=data.get("name"),
                task=data.get("task_type"),
                interface="api",
            )
            return Response(DatasetSerializer(dataset).data, status=status.HTTP_201_CREATED)
        job = dataset_import_job_create(
            actor=request.user,
            project=data.get("project"),
            files=data["files"],
            task=data["task_type"],
            name=data["name"],
            options=ImportOptions.from_input(data, interface="api"),
        )
        return Response(DatasetImportSerializer(job).data, status=status.HTTP_202_ACCEPTED)
