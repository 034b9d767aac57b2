from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0005_benchmarkrun_evidence_override"),
        ("transforms", "0009_run_item_scope"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="benchmarkresult", name="one_result_per_benchmark_unit"),
        migrations.AddField(
            model_name="benchmarkresult",
            name="side",
            field=models.CharField(
                default="query",
                help_text="What a ranking unit perturbs: query, document or both (query for every other unit).",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="benchmarkresult",
            name="documents",
            field=models.JSONField(
                blank=True,
                help_text="Document-side units: documents transformed, left out, and corpus texts encoded vs reused "
                "from the embedding cache.",
                null=True,
            ),
        ),
        migrations.AlterModelOptions(
            name="benchmarkresult",
            options={"ordering": ["run", "model", "dataset__name", "transformation", "seed", "side"]},
        ),
        migrations.AddConstraint(
            model_name="benchmarkresult",
            constraint=models.UniqueConstraint(
                fields=("run", "model", "dataset", "transformation", "seed", "side"),
                name="one_result_per_benchmark_unit_side",
            ),
        ),
    ]
