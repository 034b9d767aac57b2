from django.urls import path

from datasets import views

app_name = "datasets"
urlpatterns = [
    path("", views.dataset_list_view, name="list"),
    path("imports/<int:pk>/", views.dataset_import_view, name="import"),
    path("<str:name>/", views.dataset_detail_view, name="detail"),
]
