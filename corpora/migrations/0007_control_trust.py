import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """A project's explicit, audited trust in a shared dataset of another project as a source of
    control items (issue 39): sharing alone no longer lets a dataset supply another project's controls."""

    dependencies = [
        ("core", "0003_audit_project"),
        ("corpora", "0006_dataset_name_per_project"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ControlTrust",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("granted_at", models.DateTimeField(auto_now_add=True)),
                (
                    "dataset",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="control_trusts",
                        to="corpora.dataset",
                    ),
                ),
                (
                    "granted_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "project",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="control_trusts",
                        to="core.project",
                    ),
                ),
            ],
            options={"ordering": ["project", "dataset"]},
        ),
        migrations.AddConstraint(
            model_name="controltrust",
            constraint=models.UniqueConstraint(fields=("project", "dataset"), name="unique_control_trust_per_project"),
        ),
    ]
