from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from annotation.apis import (
    AnnotatorViewSet,
    ArgillaPasswordView,
    BenchmarkConfigViewSet,
    FlagViewSet,
    GateResultViewSet,
    StudyViewSet,
)
from core import views as core_views
from core.api_docs import docs_page
from core.apis import ObtainExpiringAuthToken, ProjectViewSet
from corpora.apis import DatasetImportViewSet, DatasetViewSet
from evaluation.apis import BenchmarkRunViewSet
from shiftlab.views import home_view
from transforms.apis import JudgeReportViewSet, PromptTemplateViewSet, TransformRunViewSet

router = DefaultRouter()
router.register("projects", ProjectViewSet, basename="project")
router.register("datasets", DatasetViewSet, basename="dataset")
router.register("dataset-imports", DatasetImportViewSet, basename="dataset-import")
router.register("prompt-templates", PromptTemplateViewSet, basename="prompt-template")
router.register("transform-runs", TransformRunViewSet, basename="transform-run")
router.register("judge-reports", JudgeReportViewSet, basename="judge-report")
router.register("studies", StudyViewSet, basename="study")
router.register("study-annotators", AnnotatorViewSet, basename="study-annotator")
router.register("study-flags", FlagViewSet, basename="study-flag")
router.register("gate-results", GateResultViewSet, basename="gate-result")
router.register("benchmark-configs", BenchmarkConfigViewSet, basename="benchmark-config")
router.register("benchmark-runs", BenchmarkRunViewSet, basename="benchmark-run")

handler400 = "core.views.bad_request_view"

urlpatterns = [
    path("", home_view, name="home"),
    path("health/", core_views.health_view, name="health"),
    path("audit/", core_views.audit_log_view, name="audit-log"),
    path("projects/", core_views.project_list_view, name="projects"),
    path("projects/<slug:slug>/", core_views.project_detail_view, name="project"),
    path("invitations/<str:token>/", core_views.invitation_accept_view, name="invitation-accept"),
    # Before Django's auth URLs: the log-in page with the lockout of core.login_guard.
    path("accounts/login/", core_views.LoginView.as_view(), name="login"),
    # Every password confirmation goes through that lockout too (core.login_guard.password_confirm).
    path("accounts/password_change/", core_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("datasets/", include("corpora.urls")),
    path("transforms/", include("transforms.urls")),
    path("annotation/", include("annotation.urls")),
    path("benchmarks/", include("evaluation.urls")),
    path("admin/password_change/", admin.site.admin_view(core_views.admin_password_change_view)),
    path("admin/", admin.site.urls),
    path("api/me/argilla-password/", ArgillaPasswordView.as_view(), name="my-argilla-password"),
    path("api/", include(router.urls)),
    path("api/auth/token/", ObtainExpiringAuthToken.as_view(), name="api-token"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: no inline script for the CSP to block.
    # Outside the demo the docs pages send a visitor to the log-in page first (core.api_docs).
    path("api/docs/", docs_page(SpectacularSwaggerSplitView.as_view(url_name="schema")), name="api-docs"),
    path("api/redoc/", docs_page(SpectacularRedocView.as_view(url_name="schema")), name="api-redoc"),
]
