from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("transforms", "0008_noise_transformations"),
    ]

    operations = [
        migrations.AddField(
            model_name="transformrun",
            name="item_scope",
            field=models.CharField(
                blank=True,
                default="",
                help_text="What the run transforms: '' its examples (a retrieval dataset's queries); "
                "'relevant_documents' the documents relevant to those examples; 'documents' the whole corpus.",
                max_length=24,
            ),
        ),
    ]
