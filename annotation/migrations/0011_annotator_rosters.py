from django.db import migrations


def rosters_from_studies(apps, schema_editor):
    """Annotators already published to a project's studies (or baseline studies) go on its roster,
    so those projects keep working with them; nobody else is put on any roster."""
    ProjectAnnotator = apps.get_model("core", "ProjectAnnotator")
    Annotator = apps.get_model("annotation", "Annotator")
    BaselineStudy = apps.get_model("annotation", "BaselineStudy")
    pairs = set(Annotator.objects.values_list("study__project_id", "user_id"))
    pairs |= set(BaselineStudy.objects.filter(annotators__isnull=False).values_list("project_id", "annotators"))
    ProjectAnnotator.objects.bulk_create(
        [ProjectAnnotator(project_id=p, user_id=u) for p, u in sorted(pairs)], ignore_conflicts=True
    )


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0010_names_per_project"),
        ("core", "0004_project_annotators"),
    ]

    operations = [migrations.RunPython(rosters_from_studies, migrations.RunPython.noop)]
