"""Forms of the benchmark and human-baseline pages (issue 20): start a benchmark run from an
approved config (or datasets), declare a human baseline study, and let an LLM annotator answer
it. The forms check what a page can; the services check the rest.

The forms that create take the caller (``user``): they offer the projects the caller may change
(``core.forms.NewInProjectForm``) and only the configs and datasets the caller may read."""

from __future__ import annotations

from typing import Any

from django import forms

from annotation.baselines.baseline_tasks import COMMON_OPTIONS, OPTION_DEFAULTS
from annotation.configs.config_export import format_of
from annotation.configs.config_schema import MAX_CONFIG_BYTES
from annotation.models import BASELINE_TASK_TYPES, BenchmarkConfig
from core.errors import ShiftlabError
from core.forms import NewInProjectForm
from core.projects import User, scoped
from corpora.forms import DatasetChoiceField
from corpora.models import Dataset
from corpora.selectors import dataset_usable_list
from corpora.task_types import TaskType
from evaluation.benchmark_plan import SIDES
from evaluation.encoder_choices import NO_ENCODERS, hub_downloads_allowed, model_choices
from evaluation.selectors import benchmark_dataset_choices
from transforms.backends import backend_aliases, configured_model
from transforms.selectors import DOCUMENTS_ALL, DOCUMENTS_RELEVANT


class ModelPickerField(forms.MultipleChoiceField):
    """The models a run names: picked from this server's (``encoder_choices.model_choices``). A
    name that is not listed (a run started before a model was removed, a retried run, an API
    client's form post) is passed on: ``benchmark_run_start`` refuses it, in words, if it cannot run."""

    def to_python(self, value) -> list[str]:
        return [name for name in super().to_python(value) if name.strip()]  # a blank post is no model

    def valid_value(self, value: str) -> bool:
        return bool(str(value).strip())


class BenchmarkRunForm(NewInProjectForm):
    """A benchmark run: an exported (approved) config or an uploaded one, or datasets only."""

    config = forms.ModelChoiceField(
        label="Validated config",
        queryset=BenchmarkConfig.objects.none(),
        required=False,
        empty_label="none: original data of the datasets below",
        help_text="An exported config of approved transformations (newest first).",
    )
    config_file = forms.FileField(
        label="or a config file",
        required=False,
        help_text="Exactly as exported by this deployment, or signed with its key by one that shares it.",
        widget=forms.ClearableFileInput(attrs={"accept": ".yaml,.yml,.json"}),
    )
    datasets = forms.ModelMultipleChoiceField(
        queryset=Dataset.objects.none(),
        to_field_name="name",
        required=False,
        help_text="With a config: leave empty for the config's datasets.",
    )
    models = ModelPickerField(
        label="Models",
        widget=forms.CheckboxSelectMultiple,
        help_text="The embedding models this server can run. Each one is scored on every dataset and transformation.",
    )
    limit = forms.IntegerField(
        label="Only the first N examples", required=False, min_value=1, help_text="Empty: every example."
    )
    name = forms.CharField(required=False, max_length=100, help_text="Shown in the list of runs.")
    sides = forms.MultipleChoiceField(
        label="Perturbed side",
        choices=[(side, side) for side in SIDES],
        initial=[],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Retrieval and reranking datasets with a config: perturb the queries, the corpus documents "
        "(reranking: the candidates), or both (one unit per side). Other datasets are perturbed on their only side. "
        "None ticked: the config's sides, else query.",
    )
    document_scope = forms.ChoiceField(
        label="Documents rewritten",
        choices=[
            ("", "the config's (else relevant to the evaluated queries)"),
            (DOCUMENTS_RELEVANT, "relevant to the evaluated queries"),
            (DOCUMENTS_ALL, "the whole corpus (one rewrite per document: slow with an LLM)"),
        ],
        initial="",
        required=False,
        help_text="For the document and both sides of retrieval datasets (reranking: every candidate).",
    )
    run_anyway = forms.BooleanField(
        label="Run anyway",
        required=False,
        help_text="Only if the config is refused because its evidence changed since it was exported (a later gate, "
        "a withdrawn approval, a revised study, changed ratings): the run records and shows what changed.",
    )

    def __init__(self, *args, user: User, **kwargs):
        kwargs.setdefault("label_suffix", "")
        kwargs.setdefault("auto_id", "bm-%s")
        super().__init__(*args, user=user, **kwargs)
        # offered: only what benchmark_run_start accepts in the preselected project (issue 42)
        datasets = self.fields["datasets"]
        if self.is_bound:
            datasets.queryset = scoped(Dataset.objects.select_related("project").order_by("name"), user)
        else:
            datasets.queryset = benchmark_dataset_choices(user=user, project=self.project_preselected())
        datasets.label_from_instance = _dataset_label
        # a run goes into its config's project, which the caller must be able to change
        configs = scoped(BenchmarkConfig.objects.order_by("-created_at"), user, write=not self.is_bound)
        if self.project_preselected() and not self.is_bound:
            configs = configs.filter(project__slug=self.project_preselected())
        self.fields["config"].queryset = configs
        self.fields["config"].initial = configs.values_list("pk", flat=True).first()
        choices = model_choices()
        self.fields["models"].choices = [(c.name, c.label) for c in choices]
        self.fields["models"].initial = [choices[0].name] if choices else []
        if not choices:
            self.fields["models"].help_text = NO_ENCODERS
        if hub_downloads_allowed():
            self.fields["other_models"] = forms.CharField(
                label="Other models from the Hugging Face hub",
                required=False,
                max_length=500,
                help_text="Space- or comma-separated model ids, e.g. sentence-transformers/all-mpnet-base-v2: "
                "checked on the hub before the run starts, downloaded by the run.",
            )

    def clean_document_scope(self) -> str | None:
        return self.cleaned_data.get("document_scope") or None

    def clean_models(self) -> list[str]:
        return [name.strip() for name in self.cleaned_data["models"] if name.strip()]

    def clean(self):
        data = super().clean()
        others = (data.get("other_models") or "").replace(",", " ").split()
        if others and "models" in data:
            data["models"] = list(dict.fromkeys([*data["models"], *others]))
        return data

    def clean_config_file(self) -> tuple[str, str] | None:
        """The uploaded config as (text, format), or None."""
        upload = self.cleaned_data["config_file"]
        if not upload:
            return None
        if upload.size > MAX_CONFIG_BYTES:
            raise forms.ValidationError(
                f"{upload.name} has {upload.size} bytes, more than the {MAX_CONFIG_BYTES} a benchmark config may have."
            )
        try:
            text = upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError(
                f"{upload.name} is not UTF-8 text: upload the file exactly as it was exported."
            ) from None
        try:
            return text, format_of(upload.name)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def add_refusal(self, exc: ShiftlabError) -> None:
        """A refusal of ``benchmark_run_start`` as ``core.pages.refusals`` hands it over: on the
        config's field when one was given, else on the field it names."""
        if self.cleaned_data.get("config_file"):
            field = "config_file"
        elif self.cleaned_data.get("config"):
            field = "config"
        else:
            field = exc.field if exc.field in self.fields else None
        self.add_error(field, str(exc))


def _dataset_label(dataset: Dataset) -> str:
    """A dataset as a form lists it: its name and whose it is (names are unique per project only)."""
    return f"{dataset.name}, {'shared' if dataset.shared else 'project ' + dataset.project.slug}"


def _positive(label: str, help_text: str, initial: int | None) -> forms.IntegerField:
    return forms.IntegerField(label=label, required=False, min_value=1, initial=initial, help_text=help_text)


class BaselineCreateForm(NewInProjectForm):
    """A human baseline study: a seeded sample of a dataset's task instances. The task is the
    dataset's; options a task does not use are ignored."""

    name = forms.CharField(max_length=100, help_text="Unique in its project, e.g. stsb-humans.")
    dataset = DatasetChoiceField(
        queryset=Dataset.objects.none(),
        to_field_name="name",
        help_text="Its task decides what annotators do: rate pairs (sts), label texts, group texts or judge relevance.",
    )
    n_instances = forms.IntegerField(
        label="Instances",
        min_value=1,
        max_value=100_000,
        help_text="How many pairs (sts), texts (classification, clustering) or queries (reranking) to draw.",
    )
    split = forms.CharField(max_length=32, initial="test", help_text="The split to draw from. Default test.")
    seed = forms.IntegerField(min_value=0, initial=0, help_text="Makes the sample reproducible. Default 0.")
    raters_per_instance = _positive(
        "Raters per instance",
        f"Default {COMMON_OPTIONS['raters_per_instance']}.",
        COMMON_OPTIONS["raters_per_instance"],
    )
    batch_size = _positive(
        "Clustering: texts per batch",
        f"Clustering only. Default {OPTION_DEFAULTS[TaskType.CLUSTERING]['batch_size']}.",
        OPTION_DEFAULTS[TaskType.CLUSTERING]["batch_size"],
    )
    candidates = _positive(
        "Reranking: candidates per query",
        f"Reranking only. Default {OPTION_DEFAULTS[TaskType.RERANKING]['candidates']}.",
        OPTION_DEFAULTS[TaskType.RERANKING]["candidates"],
    )
    stratify = forms.BooleanField(
        label="Classification: same share of each label as the dataset", required=False, help_text="Off by default."
    )
    instructions = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="What annotators read. Empty: the project's wording for the task.",
    )

    INPUTS = ("project", "name", "dataset", "n_instances", "split", "seed", "instructions")  # of baseline_create
    OPTIONS = ("raters_per_instance", "batch_size", "candidates", "stratify")

    def __init__(self, *args, user: User, **kwargs):
        kwargs.setdefault("label_suffix", "")
        kwargs.setdefault("auto_id", "bl-%s")
        super().__init__(*args, user=user, **kwargs)
        project_help = "The project (team) it belongs to; each annotator rates in an Argilla workspace of their own."
        self.fields["project"].help_text = project_help
        # offered: only what baseline_create accepts in the preselected project (issue 42)
        if self.is_bound:
            usable = scoped(Dataset.objects.select_related("project"), user)
        else:
            usable = dataset_usable_list(user=user, project=self.project_preselected())
        self.fields["dataset"].queryset = usable.filter(task_type__in=BASELINE_TASK_TYPES).order_by("name")
        self.fields["dataset"].label_from_instance = lambda d: f"{_dataset_label(d)} ({d.task_type})"

    def options(self) -> dict[str, Any]:
        """The options the dataset's task takes (``baseline_tasks.OPTION_DEFAULTS``), as given."""
        task = self.cleaned_data["dataset"].task_type
        known = {*COMMON_OPTIONS, *OPTION_DEFAULTS[task]}
        return {
            name: self.cleaned_data[name]
            for name in self.OPTIONS
            if name in known and self.cleaned_data[name] not in (None, "")
        }


class LLMAnnotateForm(forms.Form):
    """An LLM answers every instance of a baseline study the way an annotator would."""

    backend = forms.ChoiceField(
        label="LLM annotator",
        help_text="Same instructions and texts as the humans; greedy decoding. "
        "Instances it answered before are skipped.",
    )

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("label_suffix", "")
        kwargs.setdefault("auto_id", "llm-%s")
        super().__init__(*args, **kwargs)
        self.fields["backend"].choices = [
            (alias, f"{configured_model(alias)} ({alias})" if configured_model(alias) else alias)
            for alias in backend_aliases()
        ]

    def add_refusal(self, exc: ShiftlabError) -> None:
        """A refusal as ``core.pages.refusals`` hands it over: next to the form's one input."""
        self.add_error("backend", str(exc))
