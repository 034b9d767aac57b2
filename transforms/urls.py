from django.urls import path

from transforms import views

app_name = "transforms"
urlpatterns = [
    path("", views.run_list_view, name="runs"),
    path("runs/<int:pk>/", views.run_detail_view, name="run"),
    path("judge/", views.judge_report_list_view, name="judge-reports"),
    path("judge/<int:pk>/", views.judge_report_detail_view, name="judge-report"),
    path("sensitivity/", views.prompt_sensitivity_view, name="sensitivity"),
]
