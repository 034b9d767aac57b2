from django.urls import path

from corpora import views

app_name = "corpora"
urlpatterns = [
    path("", views.dataset_list_view, name="list"),
    path("imports/<int:pk>/", views.dataset_import_view, name="import"),
    path("<str:name>/", views.dataset_detail_view, name="detail"),
    path("<str:name>/delete/", views.dataset_delete_view, name="delete"),
    path("<str:name>/share/", views.dataset_share_view, name="share"),
]
