from django.urls import path

from evaluation import baseline_views, views

app_name = "evaluation"
urlpatterns = [
    path("", views.benchmark_list_view, name="benchmarks"),
    path("<int:pk>/", views.benchmark_detail_view, name="benchmark"),
    path("<int:pk>/resume/", views.benchmark_resume_view, name="benchmark-resume"),
    path("<int:pk>/report/", views.benchmark_robustness_view, name="robustness"),
    path("<int:pk>/report/<str:name>", views.benchmark_robustness_export_view, name="robustness-export"),
    path("baselines/", baseline_views.baseline_list_view, name="baselines"),
    path("baselines/<int:pk>/", baseline_views.baseline_detail_view, name="baseline"),
    path("baselines/<int:pk>/llm-progress/", baseline_views.baseline_llm_progress_view, name="baseline-llm-progress"),
]
