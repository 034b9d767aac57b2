from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("transforms", "0009_run_item_scope"),
    ]

    operations = [
        migrations.CreateModel(
            name="LLMBackendUse",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("backend_alias", models.CharField(db_index=True, max_length=64)),
                ("job_model", models.CharField(help_text="app_label.ModelName of the job's row.", max_length=100)),
                ("job_id", models.PositiveBigIntegerField()),
                ("label", models.CharField(help_text='How a user names the job, e.g. "run #7".', max_length=200)),
                ("started_at", models.DateTimeField()),
                ("heartbeat_at", models.DateTimeField()),
            ],
            options={"ordering": ["started_at", "id"]},
        ),
    ]
