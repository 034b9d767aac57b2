# Validating and publishing a study as background jobs (issue 41).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0015_judge_population_job"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="StudyJob",
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
                    "action",
                    models.CharField(choices=[("validate", "Validate"), ("publish", "Publish")], max_length=16),
                ),
                (
                    "result",
                    models.JSONField(blank=True, default=dict, help_text="What the finished job did (counts, names)."),
                ),
                ("summary", models.TextField(blank=True, help_text="What the finished job did, in words.")),
                (
                    "annotators",
                    models.ManyToManyField(
                        blank=True,
                        help_text="Whom a publish adds (none: publish again).",
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
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
                        on_delete=django.db.models.deletion.CASCADE, related_name="jobs", to="annotation.study"
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
                "abstract": False,
                "indexes": [models.Index(fields=["study", "action", "status"], name="study_job_action_status")],
            },
        ),
    ]
