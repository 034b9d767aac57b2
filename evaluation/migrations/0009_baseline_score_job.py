# Scoring models on a human-baseline study as a background job (issue 41).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0002_baseline_studies"),
        ("evaluation", "0008_stored_report_figures_sealed"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="BaselineScoreJob",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("running", "Running"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                        ],
                        db_index=True,
                        default="pending",
                        max_length=16,
                    ),
                ),
                ("total", models.PositiveIntegerField(default=0)),
                ("done", models.PositiveIntegerField(default=0)),
                ("error", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "waiting",
                    models.JSONField(
                        blank=True,
                        default=None,
                        help_text="While a task waits on a backend and retries: core.waiting.Waiting as JSON; null otherwise.",
                        null=True,
                    ),
                ),
                (
                    "model_names",
                    models.JSONField(default=list, help_text="The encoder aliases or model names asked for, in order."),
                ),
                (
                    "batch_size",
                    models.PositiveIntegerField(
                        blank=True, help_text="Encoding batch size; none: the encoder's.", null=True
                    ),
                ),
                (
                    "scores",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text="One entry per model scored: its score (RaterScore), model id and revision.",
                    ),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL
                    ),
                ),
                (
                    "study",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="score_jobs",
                        to="annotation.baselinestudy",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
                "abstract": False,
            },
        ),
    ]
