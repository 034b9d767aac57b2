import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Max
from django.utils import timezone


def freeze_earlier_leavers(apps, schema_editor):
    """Annotators withdrawn or rejected before freezing existed are frozen from their decision
    (or from now, without one). Those who have their own dataset lost only their workspace then,
    which leaves their responses editable by id: the next publish or reconcile finishes the cut."""
    Annotator = apps.get_model("annotation", "Annotator")
    now = timezone.now()
    leavers = Annotator.objects.exclude(status="active").annotate(decided=Max("decisions__decided_at"))
    for annotator in leavers:
        annotator.frozen_at = annotator.decided or now
        if annotator.argilla_dataset_id is not None:
            annotator.argilla_deactivated = False
        annotator.save(update_fields=["frozen_at", "argilla_deactivated"])


class Migration(migrations.Migration):
    """Issue 27: withdrawn and rejected annotators are frozen (the time of the cut); each
    annotator of a baseline study gets their own Argilla workspace and dataset."""

    dependencies = [
        ("annotation", "0008_projects"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="annotator",
            name="frozen_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When they were withdrawn or rejected: any later change to their responses is ignored "
                "and audited.",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="annotator",
            name="argilla_deactivated",
            field=models.BooleanField(
                default=False,
                help_text="Their access was cut in Argilla: out of their workspace, their dataset deleted.",
            ),
        ),
        migrations.RunPython(freeze_earlier_leavers, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="baselinestudy",
            name="argilla_dataset_id",
            field=models.UUIDField(
                blank=True,
                help_text="Only a study published before per-annotator datasets: its dataset shared in the "
                "project's workspace, until it is published again.",
                null=True,
            ),
        ),
        migrations.CreateModel(
            name="BaselineAnnotator",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("argilla_user_id", models.UUIDField(blank=True, null=True)),
                ("argilla_workspace", models.CharField(blank=True, max_length=200)),
                ("argilla_dataset_id", models.UUIDField(blank=True, null=True)),
                (
                    "keys",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text="Keys of the instances in their dataset, in the study's order.",
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "study",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="baseline_annotators",
                        to="annotation.baselinestudy",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="baseline_seats",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["study", "user__username"],
                "constraints": [models.UniqueConstraint(fields=("study", "user"), name="unique_baseline_annotator")],
            },
        ),
    ]
