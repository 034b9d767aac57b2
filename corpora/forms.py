from django import forms

from core.forms import NewInProjectForm
from corpora.models import Dataset, DatasetImport, dataset_name_validator
from corpora.readers import FORMATS
from corpora.task_types import TASK_SPECS


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(d, initial) for d in data]
        return [single(data, initial)]


class DatasetUploadForm(NewInProjectForm):
    files = MultipleFileField(
        help_text="One CSV/TSV/JSONL/Parquet file, or several: train + test files for classification, "
        "corpus.jsonl + queries.jsonl + test.tsv (qrels) for retrieval."
    )
    name = forms.CharField(
        max_length=100, validators=[dataset_name_validator], help_text="Unique in its project, e.g. stsb-en-test."
    )
    task = forms.ChoiceField(choices=[(t.value, f"{s.label} ({t.value})") for t, s in TASK_SPECS.items()])
    language = forms.CharField(max_length=16, initial="en")
    fmt = forms.ChoiceField(
        label="Format", required=False, choices=[("", "detect from file name")] + [(f, f) for f in FORMATS if f != "hf"]
    )
    columns = forms.CharField(
        required=False, help_text="Only for files without a header line, e.g. sentence1,sentence2,score."
    )
    split = forms.CharField(required=False, max_length=32, help_text="Split of a single file (default: test).")
    field_map = forms.CharField(
        label="Column mapping", required=False, help_text="FIELD=COLUMN pairs separated by commas, e.g. label=category."
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    @staticmethod
    def initial_from(job: DatasetImport) -> dict[str, str]:
        """The form's values for importing again with the settings of ``job`` (all but the files
        and the description, which a job does not keep)."""
        options = job.options
        return {
            "project": job.project.slug,
            "name": job.name,
            "task": job.task_type,
            "language": options.get("language") or "en",
            "fmt": options.get("fmt") or "",
            "columns": ",".join(options.get("columns") or []),
            "split": options.get("split") or "",
            "field_map": ",".join(f"{k}={v}" for k, v in (options.get("field_map") or {}).items()),
        }

    def clean_columns(self) -> list[str] | None:
        raw = self.cleaned_data["columns"].strip()
        return [c.strip() for c in raw.split(",") if c.strip()] or None

    def clean_field_map(self) -> dict[str, str] | None:
        mapping = {}
        for pair in filter(None, (p.strip() for p in self.cleaned_data["field_map"].split(","))):
            field, sep, column = pair.partition("=")
            if not sep or not field.strip() or not column.strip():
                raise forms.ValidationError(f"{pair!r} is not FIELD=COLUMN (e.g. label=category).")
            mapping[field.strip()] = column.strip()
        return mapping or None


class MtebImportForm(NewInProjectForm):
    """An MTEB task by name (``corpora.services.dataset_import_mteb``): read through mteb's own task
    object, from a local copy under ``SHIFTLAB_MTEB_DATA_DIR`` when there is one, else the hub."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("prefix", "mteb")
        super().__init__(*args, **kwargs)

    task_name = forms.CharField(
        label="MTEB task",
        max_length=200,
        help_text="As mteb names it, e.g. STSBenchmark, SciFact, Banking77Classification.",
    )
    subset = forms.CharField(
        label="Subset",
        max_length=50,
        required=False,
        help_text="Multilingual and cross-lingual tasks only, e.g. es-es or en-ar for STS17.",
    )
    name = forms.CharField(
        label="Dataset name",
        max_length=100,
        required=False,
        validators=[dataset_name_validator],
        help_text="Default: the task name (plus the subset).",
    )


class DatasetChoiceField(forms.ModelChoiceField):
    """A dataset chosen by name. Names are unique per project, so a caller who reads two datasets
    of one name (two of their projects, or a shared one) is asked to tell them apart rather than
    meeting an error page."""

    def to_python(self, value):
        try:
            return super().to_python(value)
        except Dataset.MultipleObjectsReturned:
            raise forms.ValidationError(
                f"Several datasets you can read are named {value!r}: rename one, or use the API or command with "
                "the project named.",
                code="ambiguous",
            ) from None
