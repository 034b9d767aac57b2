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
    """Withdrawn and rejected annotators are frozen (issue 27): the time of the cut."""

    dependencies = [
        ("annotation", "0008_projects"),
    ]

    operations = [
        migrations.AddField(
            model_name="annotator",
            name="frozen_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When they were withdrawn or rejected: any later change to their responses is ignored and audited.",
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
    ]
