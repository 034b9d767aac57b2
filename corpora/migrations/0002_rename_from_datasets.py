"""Carry a database from the app's old label ``datasets`` to ``corpora``.

On a database created after the rename this finds no old table and does nothing. On one created
before, the tables still carry the ``datasets_`` prefix: they are renamed, the content types (and
with them every permission and admin log entry that points at them) move to the new label, and
audit events that named ``datasets.<model>`` name ``corpora.<model>``.
"""

from django.db import migrations

MODELS = ("dataset", "datasetitem", "datasetimport")
OLD_LABEL, NEW_LABEL = "datasets", "corpora"


def forwards(apps, schema_editor):
    existing = set(schema_editor.connection.introspection.table_names())
    for model_name in MODELS:
        model = apps.get_model(NEW_LABEL, model_name)
        old_table = f"{OLD_LABEL}_{model_name}"
        if old_table in existing and model._meta.db_table not in existing:
            schema_editor.alter_db_table(model, old_table, model._meta.db_table)

    content_type = apps.get_model("contenttypes", "ContentType")
    for model_name in MODELS:
        old = content_type.objects.filter(app_label=OLD_LABEL, model=model_name).first()
        if old is None:
            continue
        # A content type made under the new label by an earlier, interrupted migrate holds no
        # data of its own yet: the old one, with its permissions, takes its place.
        content_type.objects.filter(app_label=NEW_LABEL, model=model_name).delete()
        old.app_label = NEW_LABEL
        old.save(update_fields=["app_label"])

    audit_event = apps.get_model("core", "AuditEvent")
    for model_name in MODELS:
        audit_event.objects.filter(object_type=f"{OLD_LABEL}.{model_name}").update(
            object_type=f"{NEW_LABEL}.{model_name}"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("core", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
