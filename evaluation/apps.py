from django.apps import AppConfig
from django.core import checks

from evaluation.encoders import check_encoder_settings


class EvaluationConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "evaluation"

    def ready(self) -> None:
        checks.register(check_encoders, checks.Tags.compatibility)


def check_encoders(app_configs, **kwargs) -> list[checks.CheckMessage]:
    """EVALUATION_ENCODERS must name loadable backends with valid options (no model is loaded)."""
    return [
        checks.Error(
            problem, hint="Fix EVALUATION_ENCODERS in settings or the SHIFTLAB_ENCODERS variable.", id="evaluation.E001"
        )
        for problem in check_encoder_settings()
    ]
