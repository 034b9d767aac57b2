"""API: role × endpoint permission matrix, upload, token auth and the OpenAPI schema."""

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from corpora.models import Dataset, DatasetImport

FIXTURES = settings.BASE_DIR / "fixtures"
pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_dataset(researcher):
    from corpora.services import dataset_import

    return dataset_import(source=FIXTURES / "sts/demo-sts.csv", task="sts", name="demo-sts", created_by=researcher)


def client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


ENDPOINTS = [
    ("get", "/api/datasets/"),
    ("get", "/api/datasets/demo-sts/"),
    ("get", "/api/datasets/demo-sts/items/"),
    ("get", "/api/dataset-imports/"),
    ("get", "/api/prompt-templates/"),
    ("get", "/api/transform-runs/"),
    ("get", "/api/judge-reports/"),
]


@pytest.mark.parametrize("method,url", ENDPOINTS)
@pytest.mark.parametrize("role,expected", [(None, 401), ("annotator", 403), ("researcher", 200), ("admin", 200)])
def test_permission_matrix(method, url, role, expected, demo_dataset, annotator, researcher, admin_user_role):
    user = {None: None, "annotator": annotator, "researcher": researcher, "admin": admin_user_role}[role]
    response = getattr(client_for(user), method)(url)
    assert response.status_code == expected, response.content


def test_annotator_cannot_upload_or_delete(annotator, demo_dataset):
    client = client_for(annotator)
    upload = SimpleUploadedFile("x.csv", b"sentence1,sentence2,score\na,b,1\n")
    assert client.post("/api/dataset-imports/", {"files": [upload], "name": "x", "task_type": "sts"}).status_code == 403
    assert client.delete("/api/datasets/demo-sts/").status_code == 403
    assert Dataset.objects.filter(name="demo-sts").exists()


def test_dataset_detail_and_items(researcher, demo_dataset):
    client = client_for(researcher)
    detail = client.get("/api/datasets/demo-sts/").json()
    assert detail["n_items"] == 40 and detail["content_hash"] == demo_dataset.content_hash
    items = client.get("/api/datasets/demo-sts/items/?limit=5").json()
    assert items["count"] == 40 and len(items["results"]) == 5
    assert set(items["results"][0]["payload"]) == {"sentence1", "sentence2"}
    assert client.get("/api/datasets/?task_type=clustering").json()["count"] == 0


# Real commits: the import is queued with transaction.on_commit, as in production.
@pytest.mark.django_db(transaction=True)
def test_upload_via_api_imports_the_file(researcher):
    client = client_for(researcher)
    with open(FIXTURES / "sts/demo-sts.csv", "rb") as handle:
        response = client.post("/api/dataset-imports/", {"files": [handle], "name": "api-sts", "task_type": "sts"})
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "succeeded" and body["dataset"] == "api-sts"
    assert Dataset.objects.get(name="api-sts").n_items == 40


# Real commits: the import is queued with transaction.on_commit, as in production.
@pytest.mark.django_db(transaction=True)
def test_upload_of_malformed_file_fails_the_job_and_imports_nothing(researcher):
    client = client_for(researcher)
    upload = SimpleUploadedFile("broken.csv", b"sentence1,sentence2,score\na,b,1\nc,d,lots\n")
    body = client.post("/api/dataset-imports/", {"files": [upload], "name": "broken", "task_type": "sts"}).json()
    assert body["status"] == "failed"
    assert body["error"] == "broken.csv, line 3: 'score' must be a number, found 'lots'"
    assert not Dataset.objects.filter(name="broken").exists()
    assert DatasetImport.objects.get(pk=body["id"]).status == "failed"


# Real commits: the import is queued with transaction.on_commit, as in production.
@pytest.mark.django_db(transaction=True)
def test_multi_file_upload_for_classification(researcher):
    client = client_for(researcher)
    folder = FIXTURES / "classification/demo-intents"
    with open(folder / "train.csv", "rb") as train, open(folder / "test.csv", "rb") as test:
        body = client.post(
            "/api/dataset-imports/", {"files": [train, test], "name": "intents", "task_type": "classification"}
        ).json()
    assert body["status"] == "succeeded", body
    assert Dataset.objects.get(name="intents").splits == {"test": 25, "train": 50}


def test_delete_via_api(researcher, demo_dataset):
    assert client_for(researcher).delete("/api/datasets/demo-sts/").status_code == 204
    assert not Dataset.objects.filter(name="demo-sts").exists()


def test_token_auth(researcher, demo_dataset):
    response = APIClient().post(
        "/api/auth/token/", {"username": researcher.username, "password": "correct-horse-battery-staple"}
    )
    token = response.json()["token"]
    assert token == Token.objects.get(user=researcher).key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/datasets/").json()["count"] == 1


def test_openapi_schema_and_docs_are_served(researcher, client):
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/datasets/{name}/items/" in paths and "/api/dataset-imports/" in paths
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content
    # The docs page must work offline: no asset may come from a CDN.
    assert b"cdn.jsdelivr" not in docs.content
