from django.urls import path

from annotation import views, webhook_views

app_name = "annotation"
urlpatterns = [
    path("", views.study_list_view, name="studies"),
    path("studies/<int:pk>/", views.study_detail_view, name="study"),
    path("studies/<int:pk>/publish/", views.study_publish_view, name="publish"),
    path("studies/<int:pk>/review/", views.review_queue_view, name="review"),
    path("studies/<int:pk>/gate/", views.gate_view, name="gate"),
    path("studies/<int:pk>/annotators/", views.study_annotators_view, name="annotators"),
    path("exports/", views.export_view, name="exports"),
    path("exports/<int:pk>/<str:fmt>/", views.export_download_view, name="export-download"),
    path("me/argilla/", views.my_argilla_view, name="my-argilla"),
    path("argilla/webhook/", webhook_views.argilla_webhook_view, name="argilla-webhook"),
]
