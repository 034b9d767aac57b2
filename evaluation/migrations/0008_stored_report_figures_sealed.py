# The figures of a stored robustness report are pickled and sealed with the report itself.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0007_stored_robustness_report"),
    ]

    operations = [
        migrations.RemoveField(model_name="storedrobustnessreport", name="figures"),
    ]
