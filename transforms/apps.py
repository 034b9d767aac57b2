from django.apps import AppConfig


class TransformsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "transforms"
