import django.core.validators
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """Dataset names are unique per project, not per deployment (issue 27); the name keeps an index."""

    dependencies = [
        ("core", "0003_audit_project"),
        ("corpora", "0005_projects"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="dataset",
            name="name",
            field=models.CharField(
                db_index=True,
                max_length=100,
                validators=[
                    django.core.validators.RegexValidator(
                        "^[A-Za-z0-9][A-Za-z0-9._-]*$",
                        "Use letters, digits, '.', '_' and '-' only, starting with a letter or digit.",
                    )
                ],
            ),
        ),
        migrations.AddConstraint(
            model_name="dataset",
            constraint=models.UniqueConstraint(fields=("project", "name"), name="unique_dataset_name_per_project"),
        ),
    ]
