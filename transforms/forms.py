"""Forms of the transformation pages (issue 20): start a run, and queue the three kinds of judge
report. Each form checks what a page can check (types, ranges, choices); the services check the
rest, and ``core.pages.refusals`` puts their refusal next to the field it names."""

from __future__ import annotations

from django import forms
from django.db.models import QuerySet

from core.forms import NewInProjectForm
from core.projects import User, scoped
from corpora.forms import DatasetChoiceField
from corpora.models import Dataset
from corpora.selectors import dataset_usable_list
from transforms.backends import backend_aliases, configured_model
from transforms.describe import run_label
from transforms.judging import GOLD_SIMILARITY_TASKS
from transforms.models import JudgeReport, TransformRun
from transforms.noise import NOISE_KINDS, SEVERITIES
from transforms.params import DEFAULT_SEED, MAX_ATTEMPTS_LIMIT, MAX_TOKENS_LIMIT, GenerationParams
from transforms.presets import preset_choices
from transforms.registry import TRANSFORMATIONS

DEFAULT_PARAMS = GenerationParams()


def _backend_choices() -> list[tuple[str, str]]:
    """Backend aliases as "model (alias)", the model first (the alias alone says little)."""
    choices = []
    for alias in backend_aliases():
        model = configured_model(alias)
        choices.append((alias, f"{model} ({alias})" if model and model != alias else alias))
    return choices


def _optional_count(label: str, limit: int, help_text: str) -> forms.IntegerField:
    """A positive whole-number setting up to ``limit``; empty is unset."""
    return forms.IntegerField(label=label, required=False, min_value=1, max_value=limit, help_text=help_text)


def _offer_only(field: forms.ModelChoiceField, offered: QuerySet, *, key: str = "pk") -> None:
    """Offer only ``offered`` (what the user may change) while the field accepts all it reads:
    a choice the user may only read then reaches the service, which refuses it (403) as the API
    and the command do, instead of the form calling it invalid."""
    empty = [("", field.empty_label)] if field.empty_label is not None else []
    field.widget.choices = [*empty, *((getattr(obj, key), field.label_from_instance(obj)) for obj in offered)]


class TransformRunForm(NewInProjectForm):
    """A transformation run, as ``POST /api/transform-runs/`` and ``manage.py transform`` take it.
    Empty settings are unset: a preset fills them, then the defaults."""

    dataset = DatasetChoiceField(
        queryset=Dataset.objects.order_by("name"), to_field_name="name", help_text="The texts to transform."
    )
    transformation = forms.ChoiceField(
        choices=[(t.name, f"{t.label} ({t.axis})") for t in TRANSFORMATIONS.values()]
        + [(k.name, f"{k.label} (noise, at the severities below)") for k in NOISE_KINDS.values()],
        help_text="What happens to each text; the table below this form says what each one does.",
    )
    severities = forms.TypedMultipleChoiceField(
        required=False,
        coerce=int,
        choices=[(s, f"{s}%") for s in SEVERITIES],
        widget=forms.CheckboxSelectMultiple,
        help_text="Noise kinds only: one run per severity (percent of the units changed). Empty: every level.",
    )
    preset = forms.ChoiceField(
        required=False,
        help_text="A paper's protocol: it fills the settings you leave empty and refuses ones that differ from it.",
    )
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        help_text=f"Empty: {DEFAULT_SEED}, or one run per seed of the preset.",
    )
    backend = forms.ChoiceField(label="Generator (LLM)", help_text="Configure more with SHIFTLAB_LLM_BACKENDS.")
    limit = forms.IntegerField(
        label="Only the first N items", required=False, min_value=1, help_text="Empty: every item of the dataset."
    )
    languages = forms.CharField(
        required=False,
        max_length=200,
        help_text="Target or pivot languages of translation transformations, e.g. de, fr, ja. Empty: the defaults.",
    )
    temperature = forms.FloatField(
        required=False,
        min_value=0,
        max_value=2,
        widget=forms.NumberInput(attrs={"step": "0.05"}),
        help_text=f"Sampling temperature, 0 (greedy) to 2. Empty: {DEFAULT_PARAMS.temperature}, or the preset's.",
    )
    top_p = forms.FloatField(
        label="Top-p",
        required=False,
        min_value=0.01,
        max_value=1,
        widget=forms.NumberInput(attrs={"step": "0.05"}),
        help_text=f"Nucleus sampling, (0, 1]. Empty: {DEFAULT_PARAMS.top_p}, or the preset's.",
    )
    max_tokens = _optional_count("Max tokens per answer", MAX_TOKENS_LIMIT, f"Empty: {DEFAULT_PARAMS.max_tokens}.")
    max_attempts = _optional_count(
        "Attempts per text",
        MAX_ATTEMPTS_LIMIT,
        f"A failed text is tried again up to this many times in all. Empty: {DEFAULT_PARAMS.max_attempts}.",
    )
    language_check = forms.BooleanField(
        label="Check output languages",
        required=False,
        initial=True,
        help_text="Untick to allow languages the language identifier cannot check (their check is skipped).",
    )

    def __init__(self, *args, user: User, **kwargs):
        super().__init__(*args, user=user, **kwargs)
        # offered: only what transform_runs_start accepts in the preselected project (issue 42)
        dataset = self.fields["dataset"]
        if self.is_bound:  # the service refuses a dataset of another project in its own words
            dataset.queryset = scoped(dataset.queryset, user)
        else:
            dataset.queryset = dataset_usable_list(user=user, project=self.project_preselected()).order_by("name")
        self.fields["preset"].choices = [("", "none")] + preset_choices()
        self.fields["backend"].choices = _backend_choices()

    def clean_languages(self) -> list[str] | None:
        codes = [c.strip() for c in self.cleaned_data["languages"].replace(",", " ").split() if c.strip()]
        return codes or None

    def service_data(self) -> dict:
        """The inputs and raw settings of :func:`transforms.services.transform_runs_start`."""
        data = {name: value for name, value in self.cleaned_data.items() if name != "project"}
        return {**data, "dataset": data["dataset"].name, "severities": data.get("severities") or None}


class JudgeEvaluationForm(NewInProjectForm):
    """How well a judge reproduces gold similarity scores of an STS dataset."""

    dataset = DatasetChoiceField(
        label="STS dataset",
        queryset=Dataset.objects.filter(task_type__in=GOLD_SIMILARITY_TASKS).order_by("name"),
        to_field_name="name",
        help_text="Pairs with gold similarity scores.",
    )
    judges = forms.ChoiceField(label="Judge")
    limit = forms.IntegerField(label="Only the first N pairs", required=False, min_value=1, help_text="Empty: all.")
    split = forms.CharField(required=False, max_length=32, help_text="Empty: every split.")

    def __init__(self, *args, user: User, **kwargs):
        super().__init__(*args, user=user, **kwargs)
        self.fields["dataset"].queryset = scoped(self.fields["dataset"].queryset, user)
        self.fields["judges"].choices = _backend_choices()

    def service_data(self) -> dict:
        data = {k: v for k, v in self.cleaned_data.items() if v not in (None, "")}
        return {
            **data,
            "kind": JudgeReport.Kind.EVALUATION,
            "dataset": data["dataset"].name,
            "judges": [data["judges"]],
            "project": self.cleaned_data["project"],
        }


class JudgeRunForm(forms.Form):
    """Quality and fluency of a run's rewrites, by one or more judges (the report goes into the
    run's project)."""

    run = forms.ModelChoiceField(
        label="Succeeded run",
        queryset=TransformRun.objects.filter(status=TransformRun.Status.SUCCEEDED)
        .select_related("dataset", "generator")
        .order_by("-pk"),
        help_text="The run whose rewrites the judges score.",
    )
    judges = forms.MultipleChoiceField(help_text="One or more; each scores every rewrite.")

    def __init__(self, *args, user: User, **kwargs):
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        choices = _backend_choices()
        self.fields["judges"].choices = choices
        self.fields["judges"].initial = [choices[0][0]] if choices else []
        runs = self.fields["run"]
        runs.label_from_instance = lambda r: f"{run_label(r)}, {r.generator.model}"
        # Offered: the runs the user may change, as the report goes into the run's project.
        runs.queryset, offered = scoped(runs.queryset, user), scoped(runs.queryset, user, write=True)
        _offer_only(runs, offered)

    def service_data(self) -> dict:
        return {"kind": JudgeReport.Kind.RUN, "run": self.cleaned_data["run"].pk, "judges": self.cleaned_data["judges"]}


class JudgeSelectionForm(NewInProjectForm):
    """Compare candidate generators on one transformation: every candidate transforms the same
    items and every candidate judges every candidate."""

    dataset = DatasetChoiceField(queryset=Dataset.objects.order_by("name"), to_field_name="name")
    transformation = forms.ChoiceField(
        choices=[(t.name, t.label) for t in TRANSFORMATIONS.values() if t.uses_llm], initial="paraphrase"
    )
    candidates = forms.MultipleChoiceField(
        label="Candidate generators",
        help_text="Every candidate also judges every candidate (crossover). Configure more with SHIFTLAB_LLM_BACKENDS.",
    )
    transformations = forms.MultipleChoiceField(
        label="Pool over these transformations too",
        required=False,
        choices=[(t.name, t.label) for t in TRANSFORMATIONS.values() if t.uses_llm],
        help_text="Optional: every candidate transforms each, and the report adds a pooled ranking, "
        "the top-k on each and pooled, and where the rankings cross.",
    )
    criteria = forms.MultipleChoiceField(
        label="Judged dimensions",
        required=False,
        choices=[("quality", "quality"), ("fluency", "fluency"), ("similarity", "similarity (meaning kept)")],
        help_text="Default quality and fluency; similarity only for paraphrase, backtranslation and style change.",
    )
    top_k = forms.IntegerField(label="Top k", required=False, min_value=1, initial=3, help_text="For the pooled table.")
    limit = forms.IntegerField(label="Only the first N items", required=False, min_value=1, initial=50)
    preset = forms.ChoiceField(required=False, help_text="A paper's protocol for the seed and temperature.")

    def __init__(self, *args, user: User, **kwargs):
        super().__init__(*args, user=user, **kwargs)
        self.fields["dataset"].queryset = scoped(self.fields["dataset"].queryset, user)
        self.fields["candidates"].choices = _backend_choices()
        self.fields["preset"].choices = [("", "none")] + preset_choices()

    def clean(self):
        data = super().clean()
        chosen = data.get("transformations") or []
        if chosen and data.get("transformation") and data["transformation"] not in chosen:
            data["transformations"] = [data["transformation"], *chosen]  # the first one is pooled too
        return data

    def service_data(self) -> dict:
        data = {k: v for k, v in self.cleaned_data.items() if v not in (None, "", [])}
        return {
            **data,
            "kind": JudgeReport.Kind.SELECTION,
            "dataset": data["dataset"].name,
            "project": self.cleaned_data["project"],
        }
