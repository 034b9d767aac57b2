import django.db.models.deletion
from django.db import migrations, models

import core.models


class Migration(migrations.Migration):
    """Studies, baseline studies and configs belong to a project; the old ``project`` text (the
    Argilla workspace) is kept as ``workspace``, and existing rows go into the default project."""

    dependencies = [
        ("annotation", "0007_flag_rules"),
        ("core", "0002_projects"),
    ]

    operations = [
        migrations.RenameField("study", "project", "workspace"),
        migrations.RenameField("baselinestudy", "project", "workspace"),
        migrations.AddField(
            model_name="baselinestudy",
            name="project",
            field=models.ForeignKey(
                default=core.models.default_project_pk,
                help_text="The project (team) it belongs to; see core.projects for who may read and change it.",
                on_delete=django.db.models.deletion.PROTECT,
                related_name="baseline_studies",
                to="core.project",
            ),
        ),
        migrations.AddField(
            model_name="benchmarkconfig",
            name="project",
            field=models.ForeignKey(
                default=core.models.default_project_pk,
                help_text="The project (team) it belongs to; see core.projects for who may read and change it.",
                on_delete=django.db.models.deletion.PROTECT,
                related_name="benchmark_configs",
                to="core.project",
            ),
        ),
        migrations.AddField(
            model_name="study",
            name="project",
            field=models.ForeignKey(
                default=core.models.default_project_pk,
                help_text="The project (team) it belongs to; see core.projects for who may read and change it.",
                on_delete=django.db.models.deletion.PROTECT,
                related_name="studies",
                to="core.project",
            ),
        ),
        migrations.AlterField(
            model_name="study",
            name="workspace",
            field=models.CharField(
                default="shiftlab",
                help_text="Argilla workspace: its project's slug (older studies keep the one they were published in).",
                max_length=61,
                validators=[
                    django.core.validators.RegexValidator(
                        "^[a-z0-9][a-z0-9-]{0,60}$",
                        "Use lowercase letters, digits and '-', starting with a letter or digit.",
                    )
                ],
            ),
        ),
    ]
