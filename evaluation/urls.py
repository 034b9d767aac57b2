from django.urls import path

from evaluation import views

app_name = "evaluation"
urlpatterns = [
    path("", views.benchmark_list_view, name="benchmarks"),
    path("<int:pk>/", views.benchmark_detail_view, name="benchmark"),
]
