from django.urls import path

from transforms import views

app_name = "transforms"
urlpatterns = [
    path("", views.run_list_view, name="runs"),
    path("runs/<int:pk>/", views.run_detail_view, name="run"),
]
