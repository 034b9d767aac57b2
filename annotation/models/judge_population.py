"""The LLM judges scoring every output of a study's transformation runs, for the prediction-powered
gate (``annotation.studies.judge_population_services``)."""

from django.db import models

from annotation.models.studies import Study
from core.models import TrackedJob

__all__ = ["JudgePopulationJob"]


class JudgePopulationJob(TrackedJob):
    """The study's judges scoring every output of one transformation in the background: ``done`` of
    ``total`` judge calls (outputs × judged questions × judges), counted as it goes. The judgements
    live in the judge's cache (``transforms.models.Judgement``), so a job started again only asks for
    what is missing; ``fingerprint`` says which judges, models, prompts and parameters it used."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judge_population_jobs")
    transformation = models.CharField(max_length=32)
    judges = models.JSONField(default=list, help_text="The design's judge aliases (TRANSFORM_BACKENDS).")
    fingerprint = models.CharField(
        max_length=64, blank=True, help_text="JudgePopulation.fingerprint() of the judges, models and prompts used."
    )
    result = models.JSONField(
        default=dict, blank=True, help_text="Judge calls scored and failed (every attempt unparsed), once finished."
    )

    class Meta(TrackedJob.Meta):
        pass

    def __str__(self) -> str:
        return f"judges on every {self.transformation} output of {self.study} ({self.status})"
