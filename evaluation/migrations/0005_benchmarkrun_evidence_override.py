from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("evaluation", "0004_job_waiting")]

    operations = [
        migrations.AddField(
            model_name="benchmarkrun",
            name="evidence_override",
            field=models.JSONField(
                blank=True,
                help_text="Set when the researcher ran the config although its evidence had changed since it was "
                "exported: {reasons: [what changed], by: username, at: ISO time}. None: the evidence held.",
                null=True,
            ),
        ),
    ]
