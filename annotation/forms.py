"""Forms of the study pages: the study design form, which explains every field (unit, default,
what it changes) and puts a refused design's reasons next to the fields to change, and the form
with which an annotator sets their own Argilla password."""

from __future__ import annotations

from collections.abc import Iterable

from django import forms

from annotation.models import STUDY_NAME_PATTERN
from annotation.science.annotator_quality import CAREFULNESS_FLAG_HELP
from annotation.science.design import DesignError, DesignProblem, StudyDesign, StudyKind
from annotation.studies.design_services import DesignRefused, StudyCreateRequest
from core.errors import ShiftlabError
from core.forms import NewInProjectForm
from core.projects import scoped
from transforms.backends import backend_aliases
from transforms.describe import run_label
from transforms.models import TransformRun

DEFAULT = StudyDesign()

KIND_LABELS = {
    StudyKind.REWRITE: "Rewrite: quality 1–5 and fluency 1–5 of the rewritten text",
    StudyKind.SIMILARITY: "Similarity: how similar the two texts are, 0–5",
    StudyKind.SENSITIVITY: "Sensitivity: did the meaning change, 1–5, and fluency 1–5 (meaning-changing rewrites)",
}


def _whole(label: str, help_text: str, *, low: int, high: int, **kwargs) -> forms.IntegerField:
    return forms.IntegerField(label=label, help_text=help_text, min_value=low, max_value=high, **kwargs)


def _number(label: str, help_text: str, *, low: float, high: float, step: str = "0.1") -> forms.FloatField:
    return forms.FloatField(
        label=label, help_text=help_text, min_value=low, max_value=high, widget=forms.NumberInput(attrs={"step": step})
    )


class StudyDesignForm(forms.Form):
    """The declared design of a study (``annotation.science.design.StudyDesign``), one field per parameter,
    initialised with ``base`` (the defaults, or the design a new version starts from; parameters
    without a field here keep its values). ``design()`` gives the validated design; a
    ``DesignError`` of the design itself is shown on the field it names."""

    kind = forms.ChoiceField(
        label="Questions",
        choices=[(k.value, KIND_LABELS[k]) for k in StudyKind],
        initial=DEFAULT.kind.value,
        help_text="What annotators answer for each pair of texts.",
    )
    items_per_transformation = _whole(
        "Items per transformation",
        "Rewritten texts drawn per transformation (a seeded stratified sample of its successful "
        f"texts); at most what the runs have. Default {DEFAULT.items_per_transformation}.",
        low=1,
        high=100_000,
        initial=DEFAULT.items_per_transformation,
    )
    raters_per_item = _whole(
        "Raters per item",
        "Different annotators who rate each item; you need at least this many annotators. "
        f"Default {DEFAULT.raters_per_item}.",
        low=1,
        high=50,
        initial=DEFAULT.raters_per_item,
    )
    batch_size = _whole(
        "Batch size (items)",
        f"Real items in each batch of an annotator's queue. Default {DEFAULT.batch_size}.",
        low=1,
        high=10_000,
        initial=DEFAULT.batch_size,
    )
    controls_per_batch = _whole(
        "Controls per batch",
        "Control pairs with a known answer (an easy paraphrase or two unrelated texts) mixed into "
        f"every batch. Default {DEFAULT.controls_per_batch}.",
        low=0,
        high=1_000,
        initial=DEFAULT.controls_per_batch,
    )
    min_control_ratings = _whole(
        "Control answers the check needs",
        "An annotator's control check is decided once they have answered this many control "
        f"questions; 0 = no check. Default {DEFAULT.min_control_ratings}.",
        low=0,
        high=1_000,
        initial=DEFAULT.min_control_ratings,
    )
    control_margin = _whole(
        "Control margin (scale points)",
        "A control answer passes when it is at most this far from the expected end of the scale. "
        f"Default {DEFAULT.control_margin}.",
        low=0,
        high=5,
        initial=DEFAULT.control_margin,
    )
    llm_judges = forms.MultipleChoiceField(
        label="LLM judges",
        required=False,
        help_text="LLM backends that estimate each item's answer, to flag ratings far from it. None = no LLM flags.",
    )
    llm_flag_deviation = _number(
        "Flag a rating that differs from the LLM estimate by more than (scale points)",
        f"Such a rating goes to the review queue. Default {DEFAULT.llm_flag_deviation}.",
        low=0,
        high=5,
    )
    low_rating_max = _whole(
        "Flag ratings at or below",
        f"A rating this low goes to the review queue; -1 = never. Default {DEFAULT.low_rating_max}.",
        low=-1,
        high=5,
        initial=DEFAULT.low_rating_max,
    )
    max_confirmed_flags = _whole(
        "Reject an annotator after this many confirmed flags",
        "Flags a reviewer confirmed; the annotator's ratings then stop counting and their items "
        f"go to others. Default {DEFAULT.max_confirmed_flags}.",
        low=1,
        high=10_000,
        initial=DEFAULT.max_confirmed_flags,
    )
    min_seconds_per_item = _number(
        "Too fast: fewer seconds per item than",
        f"Used by the annotator quality page. Default {DEFAULT.min_seconds_per_item:g} s.",
        low=0,
        high=3_600,
        step="0.5",
    )
    flag_too_fast_share = _number(
        "Flag an annotator when this share of items is too fast",
        "A fraction from 0 to 1; 0 = off (the default).",
        low=0,
        high=1,
        step="0.05",
    )
    flag_straight_line_run = _whole(
        "Flag a run of identical answers this long",
        "Straight-lining: the same answer to a question this many items in a row; 0 = off (the default).",
        low=0,
        high=100_000,
        initial=DEFAULT.flag_straight_line_run,
    )
    flag_low_competence = _number(
        "Flag an annotator whose competence interval lies below",
        "From the rater model, a fraction from 0 to 1; 0 = off (the default).",
        low=0,
        high=1,
        step="0.05",
    )
    flag_low_carefulness = forms.FloatField(
        label="Flag an annotator whose carefulness is below this fraction of the study's upper quartile",
        required=False,
        min_value=0,
        max_value=1,
        widget=forms.NumberInput(attrs={"step": "0.05"}),
        help_text=f"Carefulness combines agreement with the other raters, offset, controls and time (0 to 1). "
        f"{CAREFULNESS_FLAG_HELP} Empty or 0 = off (the default).",
    )
    acceptance_threshold = _number(
        "Acceptance threshold (mean rating)",
        "A transformation passes the gate when the mean of every question is at least this. "
        f"Default {DEFAULT.acceptance_threshold:g}.",
        low=0,
        high=5,
    )
    single_rater_pilot = forms.BooleanField(
        label="Single-rater pilot",
        required=False,
        help_text="A gate passes only when every item has at least 2 counted raters, so that agreement can be "
        "measured. Tick this to let a pilot with one rater per item pass; the gate and the exported config "
        "mark it as a single-rater pilot. Off by default.",
    )
    min_ac2_lower = forms.FloatField(
        label="Minimum agreement (AC2 lower bound)",
        required=False,
        min_value=-1,
        max_value=1,
        widget=forms.NumberInput(attrs={"step": "0.01"}),
        help_text="A transformation passes only when every question's AC2 (ordinal) lower 95% confidence bound "
        "is at least this. Empty = no minimum (the default, as in the paper's protocol).",
    )
    adaptive = forms.BooleanField(
        label="Adaptive stopping",
        required=False,
        help_text="Stop rating a transformation once its pass or fail is statistically settled; its "
        "unsubmitted items leave the queues. Off by default.",
    )
    adaptive_alpha = _number(
        "Adaptive stopping: error rate α",
        f"Chance of settling on the wrong side of the threshold, in (0, 0.5]. Default {DEFAULT.adaptive_alpha:g}.",
        low=0.001,
        high=0.5,
        step="0.001",  # the browser counts steps from the minimum: with 0.01, the default 0.05 is refused
    )
    adaptive_min_items = _whole(
        "Adaptive stopping: at least this many items",
        f"No decision before this many items are fully rated. Default {DEFAULT.adaptive_min_items}.",
        low=1,
        high=100_000,
        initial=DEFAULT.adaptive_min_items,
    )
    adaptive_gate_raters = _whole(
        "Adaptive stopping: raters per item the gate observes",
        "0 = off: every item gets all its raters. Fewer than the raters per item (e.g. 2 of 3, with pull "
        "assignment): the gate observes each item's first raters, and an item gets its further raters only "
        "where those disagree by more than a quarter of the scale (1 point on 1–5) on a question. 1 = one "
        "rating per item for the gate, with a share of items rated by everyone (below); it hands each annotator "
        "at most 10 items at a time (5 with the asymptotic sequence), so that no one person's run of items "
        "steers the first decisions.",
        low=0,
        high=100,
        initial=DEFAULT.adaptive_gate_raters,
        required=False,
    )
    adaptive_overlap_share = forms.FloatField(
        label="One rating per item: share of items rated by all raters",
        required=False,
        min_value=0,
        max_value=1,
        widget=forms.NumberInput(attrs={"step": "0.05"}),
        help_text="With the gate on 1 rater per item: this share of each transformation's items, drawn by the "
        "seed before any rating, gets all its raters, for agreement (AC2) and the rater model. 0.2 = one item "
        "in five. 0 otherwise.",
    )
    adaptive_min_raters = _whole(
        "Adaptive stopping: distinct raters before any decision",
        "No decision before this many different people rated the items it rests on. 0 = the default: 3 with "
        "one rating per item, else 2.",
        low=0,
        high=1000,
        initial=DEFAULT.adaptive_min_raters,
        required=False,
    )
    adaptive_sequence = forms.ChoiceField(
        label="Adaptive stopping: confidence sequence",
        choices=[
            ("plugin", "Betting, plug-in bet: valid at every number of items (the default)"),
            ("agrapa", "Betting, variance-adaptive bet (aGRAPA): valid at every number of items"),
            ("asymptotic", "Asymptotic: uses the variance, fewest ratings; valid as the number of items grows"),
        ],
        required=False,
        help_text="How the gate turns ratings into an interval that holds however often it looks. See "
        "docs/annotation.md, 'Fewer ratings for the same decision'.",
    )
    gate_estimator = forms.ChoiceField(
        label="Adaptive stopping: estimate from",
        choices=[
            ("human", "The human ratings alone (the default)"),
            (
                "prediction_powered",
                "The LLM judges' scores of every output, corrected by the human ratings (prediction-powered)",
            ),
        ],
        required=False,
        help_text="Prediction-powered: the judges score every output of the run; the human ratings remove "
        "the judges' bias, so the estimate targets the human mean whatever the judges' quality, and a judge "
        "that agrees with the raters needs fewer ratings. Items are then a simple random sample of the outputs.",
    )
    batches_released = _whole(
        "Batches in Argilla at a time",
        "Unfinished batches each annotator's queue holds; the next arrives as they finish one. "
        "0 = the whole queue at once (the default).",
        low=0,
        high=10_000,
        initial=DEFAULT.batches_released,
    )
    assignment = forms.ChoiceField(
        label="Who rates what",
        choices=[
            ("fixed", "Fixed: every annotator's queue drawn at publish, equal loads"),
            ("pull", "Pull: the next batch goes to whoever finished theirs, items closest to completion first"),
        ],
        initial=DEFAULT.assignment,
        required=False,  # left out: the design's current value (clean_assignment)
        help_text="Pull lets the work follow the annotators who rate, so items complete about in order and "
        "adaptive stopping wastes fewer ratings on items still in flight when it settles (how much it saves "
        "depends on how far each mean lies from the threshold). Needs at least 1 batch in Argilla at a time. "
        "Default fixed.",
    )
    seed = _whole(
        "Sampling seed",
        f"Makes the item sample, controls and assignment reproducible. Default {DEFAULT.seed}.",
        low=0,
        high=2**31 - 1,
        initial=DEFAULT.seed,
    )
    detectability_limit = forms.FloatField(
        label="Detectability limit (AUC)",
        help_text="Locking is refused when a transformation's easy-positive controls can be told from its real "
        "items with a cross-validated AUC above this (0.5 = indistinguishable, 1 = always), or are too few "
        f"(under 5) to estimate it. Default {DEFAULT.detectability_limit}.",
        min_value=0.5,
        max_value=1,
        required=False,  # left out: the design's current value (clean_detectability_limit)
        widget=forms.NumberInput(attrs={"step": "0.01"}),
    )
    detectability_override = forms.CharField(
        label="Lock with detectable (or too few) controls because…",
        required=False,
        max_length=1000,
        help_text="Leave empty to have a lock with detectable controls, or too few to tell, refused. A reason "
        "given here lets it lock anyway; the reason and the AUCs (or why there are none) are recorded in the "
        "audit log and the exported config.",
    )
    guidelines = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="What annotators read before they start (Markdown). Empty = the project's wording for the questions.",
    )

    FIELDSETS = (
        ("Questions and sample", ("kind", "items_per_transformation", "raters_per_item", "seed")),
        (
            "Batches and controls",
            (
                "batch_size",
                "controls_per_batch",
                "min_control_ratings",
                "control_margin",
                "detectability_limit",
                "detectability_override",
            ),
        ),
        (
            "Flags and rejection",
            (
                "llm_judges",
                "llm_flag_deviation",
                "low_rating_max",
                "max_confirmed_flags",
                "min_seconds_per_item",
                "flag_too_fast_share",
                "flag_straight_line_run",
                "flag_low_competence",
                "flag_low_carefulness",
            ),
        ),
        (
            "Gate",
            (
                "acceptance_threshold",
                "single_rater_pilot",
                "min_ac2_lower",
                "adaptive",
                "adaptive_alpha",
                "adaptive_min_items",
                "adaptive_gate_raters",
                "adaptive_overlap_share",
                "adaptive_min_raters",
                "adaptive_sequence",
                "gate_estimator",
                "batches_released",
                "assignment",
            ),
        ),
        ("Guidelines", ("guidelines",)),
    )

    def fieldsets(self) -> list[tuple[str, list[forms.BoundField]]]:
        """The design fields in groups, for the page; fields of a subclass come first."""
        grouped = {name for _, names in self.FIELDSETS for name in names}
        first = [self[name] for name in self.fields if name not in grouped]
        groups = [(title, [self[name] for name in names]) for title, names in self.FIELDSETS]
        return ([("Study", first)] if first else []) + groups

    def __init__(self, *args, base: StudyDesign = DEFAULT, **kwargs):
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self._base = base
        aliases = backend_aliases()
        self.fields["llm_judges"].choices = [(a, a) for a in dict.fromkeys([*aliases, *base.llm_judges])]
        values = {name: getattr(base, name) for name in StudyDesign.__dataclass_fields__} | base.to_dict()
        for name in self.design_fields():
            self.fields[name].initial = values[name]

    @classmethod
    def design_fields(cls) -> list[str]:
        return [name for name in cls.base_fields if name in StudyDesign.__dataclass_fields__]

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            self._design = self._base.overlaid(self.design_values())
        except DesignError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, str(exc).removeprefix("design."))
        return data

    def clean_assignment(self) -> str:
        return self.cleaned_data.get("assignment") or self._base.assignment

    def clean_flag_low_carefulness(self) -> float:
        value = self.cleaned_data.get("flag_low_carefulness")
        return 0.0 if value is None else value

    def clean_adaptive_gate_raters(self) -> int:
        value = self.cleaned_data.get("adaptive_gate_raters")
        return self._base.adaptive_gate_raters if value is None else value

    def clean_adaptive_overlap_share(self) -> float:
        value = self.cleaned_data.get("adaptive_overlap_share")
        return self._base.adaptive_overlap_share if value is None else value

    def clean_adaptive_min_raters(self) -> int:
        value = self.cleaned_data.get("adaptive_min_raters")
        return self._base.adaptive_min_raters if value is None else value

    def clean_adaptive_sequence(self) -> str:
        return self.cleaned_data.get("adaptive_sequence") or self._base.adaptive_sequence

    def clean_gate_estimator(self) -> str:
        return self.cleaned_data.get("gate_estimator") or self._base.gate_estimator

    def clean_detectability_limit(self) -> float:
        value = self.cleaned_data.get("detectability_limit")
        return self._base.detectability_limit if value is None else value

    def design(self) -> StudyDesign:
        """The design (after ``is_valid()``)."""
        return self._design

    def design_values(self) -> dict:
        """The design fields as entered (after ``is_valid()``), for a request: the service lays them
        over its base design, the defaults or the study's own."""
        return {name: self.cleaned_data[name] for name in self.design_fields()}

    def add_problems(self, problems: Iterable[DesignProblem]) -> None:
        for problem in problems:
            self.add_error(problem.field if problem.field in self.fields else None, problem.message)

    def add_refusal(self, exc: ShiftlabError) -> None:
        """A service's refusal as ``core.pages.refusals`` hands it over, next to the fields it
        names: each problem of a refused design, else the input the error names (``field``)."""
        if isinstance(exc, DesignRefused):
            self.add_problems(exc.problems)
        else:
            self.add_error(exc.field if exc.field in self.fields else None, str(exc))


class StudyCreateForm(NewInProjectForm, StudyDesignForm):
    """A new draft study: its name, project and runs, then the design."""

    name = forms.CharField(
        max_length=61,
        help_text="Lower-case letters, digits and hyphens, e.g. paraphrase-check.",
        widget=forms.TextInput(attrs={"pattern": STUDY_NAME_PATTERN.removeprefix("^").removesuffix("$")}),
    )
    runs = forms.ModelMultipleChoiceField(
        label="Succeeded runs to validate",
        queryset=TransformRun.objects.none(),
        help_text="Each run's transformation gets its own sample of items.",
        widget=forms.SelectMultiple(attrs={"size": 6}),
    )
    field_order = ["name", "project", "runs"]

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, user=user, **kwargs)
        self.fields["project"].help_text = (
            "The team the study belongs to; its runs must be in it. Left empty: the runs' project. "
            "Each annotator rates in an Argilla workspace of their own."
        )
        runs = TransformRun.objects.filter(status=TransformRun.Status.SUCCEEDED).select_related("dataset", "project")
        runs = scoped(runs, user, write=True)
        if self.project_preselected() and not self.is_bound:  # what study_create accepts in it (issue 42)
            runs = runs.filter(project__slug=self.project_preselected())
        self.fields["runs"].queryset = runs.order_by("-pk")
        self.fields["runs"].label_from_instance = lambda r: f"{run_label(r)}, project {r.project.slug}"

    def request(self) -> StudyCreateRequest:
        """The study asked for (after ``is_valid()``): ``study_create`` checks every rule."""
        data = self.cleaned_data
        return StudyCreateRequest(
            name=data["name"],
            runs=[run.pk for run in data["runs"]],
            design=self.design_values(),
            project=data["project"] or None,
        )


class ArgillaPasswordForm(forms.Form):
    """An annotator sets their own Argilla password, confirming who they are with their Shiftlab one."""

    current_password = forms.CharField(
        label="Your Shiftlab password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="The one you signed in here with: nobody else can set your Argilla password.",
    )
    password = forms.CharField(
        label="New Argilla password",
        min_length=8,
        max_length=100,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="At least 8 characters. Shiftlab passes it to Argilla and keeps no copy.",
    )
    password_again = forms.CharField(
        label="New Argilla password, again",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean(self):
        data = super().clean()
        if data.get("password") and data.get("password") != data.get("password_again"):
            self.add_error("password_again", "The two passwords differ: type the same one twice.")
        return data
