import django.core.validators
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """Study names (with their version) and baseline study names are unique per project, not per
    deployment: another project's name is free, and no refusal reveals it (issue 27)."""

    dependencies = [
        ("annotation", "0009_frozen_and_isolated_annotators"),
        ("core", "0003_audit_project"),
        ("corpora", "0005_projects"),
        ("transforms", "0006_job_waiting"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="study",
            name="unique_study_version",
        ),
        migrations.AlterField(
            model_name="baselinestudy",
            name="name",
            field=models.CharField(
                max_length=61,
                validators=[
                    django.core.validators.RegexValidator(
                        "^[a-z0-9][a-z0-9-]{0,60}$",
                        "Use lowercase letters, digits and '-', starting with a letter or digit.",
                    )
                ],
            ),
        ),
        migrations.AddConstraint(
            model_name="baselinestudy",
            constraint=models.UniqueConstraint(fields=("project", "name"), name="unique_baseline_name_per_project"),
        ),
        migrations.AddConstraint(
            model_name="study",
            constraint=models.UniqueConstraint(
                fields=("project", "name", "version"), name="unique_study_version_per_project"
            ),
        ),
    ]
