"""Control items of a study: gathering the candidates ``study_lock`` draws them from, and how
easily the drawn controls can be told from the real items.

Easy positives come, in this order of preference, from
1. the researcher's control pool file (``annotation.studies.control_pool``);
2. gold paraphrase pairs of the study's own datasets: STS pairs whose gold score is in the top
   tenth of the scale (≥ 4.5 on 0–5), pair-classification pairs labelled 1;
3. the same from the other datasets of the study's project, and shared datasets of other projects
   that the study's project chose to trust for controls (``corpora.services.dataset_trust_for_controls``:
   explicit, by a project owner or an admin, audited), whose languages fit the study's.

Sharing a dataset alone never lets it supply another project's controls: every source below is
limited to ``corpora.selectors.control_source_datasets`` of the study's project, its own datasets
included (a study's runs may read a shared dataset they do not trust; its gold pairs, texts and
held-back outputs are then not drawn, and a shortage names it with the command that trusts it).

Easy negatives come from
1. the pool file;
2. the study's runs' outputs that were not sampled: the source of one held-back item against
   the output of another held-back item of the same run (the real items' languages and style),
   for runs over a control source;
3. other texts of the study's datasets that are control sources, paired with each other.

Expected answers therefore come from gold data (a dataset's gold score, or the kind a researcher
declared in the pool) only. Real items of earlier studies are never controls, even when their
raters agreed (the pairs "validated in earlier studies" of issue 14 are no longer drawn): a pair
rated as a real item in any study of the project, in either order, is never a control, nor is a
transformed text shown as a real item there (its text B). Candidates that served as controls in
an earlier study of the project come last, after every fresh one, so that revisions and later
studies draw new controls while there are any; the assignment
(``assignment_services``) never gives an annotator a control whose text they met in a control of
another study or saw as a real item (in any study, this one included).

Nothing of this reaches Argilla: controls become ``StudyItem`` rows like the real items.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from annotation.kinds import ItemKind
from annotation.models import Study, StudyItem
from annotation.science.controls import (
    ControlPair,
    ControlShortage,
    PairCandidate,
    Shape,
    TextCandidate,
    draw_controls,
)
from annotation.science.design import StudyDesign
from annotation.science.detectability import ControlDetectability, Record, control_detectability
from annotation.science.sampling import seeded_rng
from annotation.science.text_measures import word_overlap
from annotation.studies.control_pool import POOL_ORIGIN
from core.errors import ShiftlabError
from corpora.models import Dataset, DatasetItem
from corpora.selectors import control_source_datasets, untrusted_shared_datasets
from corpora.services import trust_command
from corpora.task_types import TASK_SPECS, task_spec
from transforms.attempts import side_language
from transforms.describe import transformation_title
from transforms.models import TransformedItem
from transforms.registry import KEYWORD_TRANSFORMATIONS, transformation_get
from transforms.text_metrics import normalized_edit_distance, word_count

GOLD_TASKS = tuple(task for task, spec in TASK_SPECS.items() if spec.controls_from_gold)
# An STS pair is a paraphrase when its gold score is in the top tenth of the scale (4.5 on 0-5).
GOLD_TOP_FRACTION = 0.9


def source_language(out: TransformedItem) -> str:
    """The language of a transformed text's source (the sentence's own side of a cross-lingual pair)."""
    return side_language(out.item.language, out.side, out.run.dataset.task_type)


def origin_label(origin: str) -> str:
    """An origin key of a control candidate in words."""
    kind, _, ref = origin.partition(":")
    return {
        POOL_ORIGIN: "control pool file",
        "validated": f"pairs validated in study {ref}",
        "gold": f"gold pairs of {ref}",
        "held_back": f"unsampled outputs of run {ref}",
        "texts": f"other texts of {ref}",
    }.get(kind, origin)


def _gold_threshold(dataset: Dataset) -> float | None:
    """The gold score from which a pair counts as a paraphrase: 1 for a binary gold (pair
    classification); for a similarity score (STS), the top tenth of the scale, taken as 0-1 or
    0-5 when the observed scores fit in it, else their observed range."""
    if task_spec(dataset.task_type).gold_kind == "binary":
        return 1.0
    low, high = dataset.metadata.get("gold_min"), dataset.metadata.get("gold_max")
    if low is None or high is None:
        return None
    top = 1.0 if high <= 1 else 5.0 if high <= 5 else float(high)
    bottom = 0.0 if low >= 0 else float(low)
    return bottom + GOLD_TOP_FRACTION * (top - bottom)


def _gold_pairs(datasets: Sequence[Dataset]) -> list[PairCandidate]:
    pairs = []
    for dataset in datasets:
        threshold = _gold_threshold(dataset)
        if threshold is None:
            continue
        first, second = task_spec(dataset.task_type).transformable_fields
        items = DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("split", "position")
        for item in items.only("payload", "gold", "language").iterator(chunk_size=2000):
            if not isinstance(item.gold, int | float) or item.gold < threshold:
                continue
            pairs.append(
                PairCandidate(
                    str(item.payload.get(first, "")).strip(),
                    str(item.payload.get(second, "")).strip(),
                    side_language(item.language, first, dataset.task_type),
                    side_language(item.language, second, dataset.task_type),
                    origin=f"gold:{dataset.name}",
                    symmetric=True,
                )
            )
    return [p for p in pairs if p.text_a and p.text_b]


def _fits(dataset: Dataset, patterns: set[tuple[str, str]]) -> bool:
    for language in dataset.languages:
        sides = tuple(side_language(language, f, dataset.task_type) for f in ("sentence1", "sentence2"))
        if sides in patterns or sides[::-1] in patterns:
            return True
    return False


def _held_back_texts(held_back: Sequence[TransformedItem]) -> list[TextCandidate]:
    texts = []
    for out in held_back:
        common = {"group": out.item_id, "pool": f"run:{out.run_id}", "origin": f"held_back:{out.run_id}"}
        texts.append(TextCandidate(out.source_text, source_language(out), side="a", **common))
        made_by = out.run.transformation
        texts.append(TextCandidate(out.output_text, out.target_language, side="b", transformation=made_by, **common))
    return texts


def _dataset_texts(datasets: Sequence[Dataset]) -> list[TextCandidate]:
    texts = []
    for dataset in datasets:
        fields = task_spec(dataset.task_type).transformable_fields
        items = DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("split", "position")
        for item in items.only("payload", "language").iterator(chunk_size=2000):
            for field in fields:
                text = item.payload.get(field)
                if isinstance(text, str) and text.strip():
                    texts.append(
                        TextCandidate(
                            text.strip(),
                            side_language(item.language, field, dataset.task_type),
                            group=item.pk,
                            pool=f"dataset:{dataset.pk}",
                            origin=f"texts:{dataset.name}",
                        )
                    )
    return texts


@dataclass(frozen=True)
class History:
    """What earlier studies of the project showed: the (text A, text B) pairs and the texts B of
    their real items, and the texts of their controls."""

    real_pairs: frozenset[tuple[str, str]]
    real_outputs: frozenset[str]
    control_texts: frozenset[str]

    def allows(self, candidate: PairCandidate | TextCandidate) -> bool:
        """Never a pair that was a real item (either order), nor a text shown as a real item's output."""
        if isinstance(candidate, TextCandidate):
            return candidate.text not in self.real_outputs
        pair = (candidate.text_a, candidate.text_b)
        return (
            pair not in self.real_pairs
            and pair[::-1] not in self.real_pairs
            and not {candidate.text_a, candidate.text_b} & self.real_outputs
        )

    def used(self, candidate: PairCandidate | TextCandidate) -> bool:
        """Shown as (part of) a control in an earlier study."""
        if isinstance(candidate, TextCandidate):
            return candidate.text in self.control_texts
        return bool({candidate.text_a, candidate.text_b} & self.control_texts)


def study_history(study: Study) -> History:
    """The real items and controls of the project's other studies (``History``)."""
    items = StudyItem.objects.filter(study__project_id=study.project_id).exclude(study=study)
    real = list(items.filter(kind=ItemKind.REAL).values_list("text_a", "text_b"))
    controls = items.exclude(kind=ItemKind.REAL).values_list("text_a", "text_b")
    return History(
        real_pairs=frozenset(real),
        real_outputs=frozenset(b for _, b in real),
        control_texts=frozenset(t for pair in controls for t in pair),
    )


def _fresh_first(tiers: Iterator[list], history: History) -> Iterator[list]:
    """The tiers without what ``history`` forbids and without what earlier studies used as
    controls, then one last tier of everything allowed (used or not: texts of a negative pair up
    with each other, so a fresh text may need a used partner)."""
    allowed_all = []
    for tier in tiers:
        allowed = [c for c in tier if history.allows(c)]
        allowed_all.extend(allowed)
        yield [c for c in allowed if not history.used(c)]
    yield allowed_all


def project_datasets(study: Study):
    """Datasets a study may draw controls from: its project's, and shared datasets of other
    projects that its project trusts for controls (``corpora.selectors.control_source_datasets``)."""
    return control_source_datasets(study.project_id)


def _run_datasets(study: Study):
    return Dataset.objects.filter(transform_runs__in=study.runs.all())


def _own_datasets(study: Study) -> list[Dataset]:
    """The datasets of the study's runs that may supply its controls."""
    sources = project_datasets(study).values("pk")
    return list(_run_datasets(study).filter(pk__in=sources).distinct().order_by("name"))


def untrusted_run_datasets(study: Study) -> list[Dataset]:
    """Shared datasets of other projects that the study's runs read but its project does not trust
    for controls: nothing of them becomes a control."""
    untrusted = untrusted_shared_datasets(study.project_id).values("pk")
    return list(_run_datasets(study).filter(pk__in=untrusted).select_related("project").distinct().order_by("name"))


def control_held_back(study: Study, held_back: Sequence[TransformedItem]) -> list[TransformedItem]:
    """The held-back outputs whose dataset may supply the study's controls."""
    sources = set(project_datasets(study).values_list("pk", flat=True))
    return [out for out in held_back if out.run.dataset_id in sources]


def _positive_tiers(study: Study, pool, patterns: set[tuple[str, str]]) -> Iterator[list[PairCandidate]]:
    yield [pair for kind, pair in pool if kind == ItemKind.EASY_POSITIVE]
    own = _own_datasets(study)
    yield _gold_pairs([d for d in own if task_spec(d.task_type).controls_from_gold])
    others = project_datasets(study).filter(task_type__in=GOLD_TASKS).exclude(pk__in=[d.pk for d in own])
    yield _gold_pairs([d for d in others.order_by("name") if _fits(d, patterns)])


def _negative_tiers(study: Study, pool, held_back: Sequence[TransformedItem]) -> Iterator[list]:
    yield [pair for kind, pair in pool if kind == ItemKind.EASY_NEGATIVE]
    yield _held_back_texts(control_held_back(study, held_back))
    yield _dataset_texts(_own_datasets(study))


def _shortage_message(study: Study, exc: ControlShortage) -> str:
    parts = []
    for s in exc.shortages:
        where = (
            f"text A in {s.pattern[0] or '(no language)'} and text B in {s.pattern[1] or '(no language)'}"
            if s.pattern[0] != s.pattern[1]
            else f"both texts in {s.pattern[0] or '(no language)'}"
        )
        found = ", ".join(f"{origin_label(o)}: {n}" for o, n in s.found_by_origin) or "no source had any"
        what = (
            "a text against a meaning-preserving rewrite of it, not a punctuation edit"
            if s.kind == ItemKind.EASY_POSITIVE
            else "a text against an unrelated text of another item"
        )
        parts.append(
            f"{s.needed} {s.kind.value.replace('_', ' ')} controls with {where} are needed ({what}, "
            f"appearing nowhere else in the study), {s.found} found ({found})"
        )
    example = exc.shortages[0]
    untrusted = _untrusted_hint(study, exc)
    return (
        f"cannot build control items for {study}; nothing was written. "
        + "; ".join(parts)
        + untrusted
        + ". Supply pairs in a control pool file (JSONL or CSV with columns text_a, text_b, "
        f"kind={example.kind.value}, language_a={example.pattern[0] or 'xx'}, "
        f"language_b={example.pattern[1] or 'xx'}) and lock with "
        f"`manage.py study lock {study.name}@{study.version} --control-pool FILE`, import into project "
        f"{study.project} a dataset with gold paraphrase pairs in these languages (STS or pair classification; "
        "controls come only from the study's project and the shared datasets it trusts for controls, never from "
        "real items of earlier studies), or sample fewer items (design.items_per_transformation). "
        "See docs/annotation.md, 'Sampling and control items'."
    )


def _untrusted_hint(study: Study, exc: ControlShortage) -> str:
    """Shared datasets of other projects that could have supplied the missing controls but are not
    trusted by the study's project, with the command that trusts one (its owners or an admin)."""
    untrusted = {d.pk: d for d in untrusted_run_datasets(study)}
    if any(s.kind == ItemKind.EASY_POSITIVE for s in exc.shortages):
        patterns = {s.pattern for s in exc.shortages}
        gold = untrusted_shared_datasets(study.project_id).filter(task_type__in=GOLD_TASKS).select_related("project")
        untrusted.update({d.pk: d for d in gold.order_by("name") if _fits(d, patterns)})
    if not untrusted:
        return ""
    named = ", ".join(f"{d.name} of project {d.project.slug}" for d in list(untrusted.values())[:5])
    first = next(iter(untrusted.values()))
    return (
        f"; shared datasets that {study.project.slug} does not trust for controls were left out ({named}): an owner "
        f"of {study.project.slug} or an admin may trust one, e.g. `{trust_command(first, study.project)}` "
        "(only if its gold scores can be relied on: they become the expected answers)"
    )


def study_controls_draw(
    *,
    study: Study,
    design: StudyDesign,
    real: Sequence[tuple[str, str, str, str, str]],
    held_back: Sequence[TransformedItem],
    n: int,
    pool: Sequence[tuple[ItemKind, PairCandidate]] = (),
) -> list[ControlPair]:
    """``n`` controls for ``study`` whose real items are ``real`` (text A, text B, language A,
    language B, transformation); ``held_back`` are the successful outputs of its runs that were not sampled.
    Raises ``ShiftlabError`` saying what is missing and how to supply it."""
    shapes = [
        Shape(
            la,
            lb,
            word_count(a),
            word_count(b),
            normalized_edit_distance(a, b),
            transformation=t,
            overlap=word_overlap(a, b),
            keywords=t in KEYWORD_TRANSFORMATIONS,
            noise=transformation_get(t).noise,
            severity=transformation_get(t).severity,
        )
        for a, b, la, lb, t in real
    ]
    patterns = {s.pattern for s in shapes}
    history = study_history(study)
    try:
        return draw_controls(
            shapes,
            n=n,
            positives=_fresh_first(_positive_tiers(study, pool, patterns), history),
            negatives=_fresh_first(_negative_tiers(study, pool, held_back), history),
            taken={t for a, b, *_ in real for t in (a, b)},
            rng=seeded_rng(design.seed, "controls"),
        )
    except ControlShortage as exc:
        raise ShiftlabError(_shortage_message(study, exc)) from exc


def items_detectability(items: Sequence[StudyItem], *, seed: int) -> ControlDetectability:
    """The detectability check over a study's items (in position order), seeded by the design."""
    records = [Record(i.kind, i.text_a, i.text_b, i.language_a, i.language_b) for i in items]
    return control_detectability(records, rng=seeded_rng(seed, "detectability"))


def detectability_by_transformation(
    items: Sequence[StudyItem], imitates: dict[int, str], *, seed: int
) -> dict[str, ControlDetectability]:
    """The detectability check per transformation: its real items against the controls shaped
    after them (``imitates``: id of a control row -> transformation), items in position order."""
    out = {}
    for name in sorted({i.transformation for i in items if i.kind == ItemKind.REAL}):
        mine = [i for i in items if (i.transformation if i.kind == ItemKind.REAL else imitates.get(id(i))) == name]
        out[name] = items_detectability(mine, seed=seed)
    return out


def study_control_detectability(*, study: Study) -> ControlDetectability:
    """How well cheap features tell the study's controls from its real items (cross-validated
    AUC; see ``annotation.science.detectability``). Computed once at lock, when the items are drawn, and
    read from ``Study.sample_info``; computed here for a study locked before that."""
    if stored := study.sample_info.get("detectability"):
        return ControlDetectability.from_dict(stored)
    items = study.items.order_by("position").only("kind", "text_a", "text_b", "language_a", "language_b")
    return items_detectability(list(items), seed=StudyDesign.from_dict(study.design).seed)


def study_detectability_notes(study: Study) -> list[str]:
    """Lines for the study page and ``study status``: each transformation's detectability as
    stored at lock, and the override when the study locked with detectable controls."""
    info = study.sample_info
    lines = [
        f"{transformation_title(name)}: easy positives {ControlDetectability.from_dict(d).easy_positive.text()}, "
        f"easy negatives {ControlDetectability.from_dict(d).easy_negative.text()}"
        for name, d in info.get("detectability_by_transformation", {}).items()
    ]
    if override := info.get("detectability_override"):
        if override["over_limit"]:
            over = ", ".join(f"{transformation_title(name)} {auc:.2f}" for name, auc in override["over_limit"].items())
            lines.append(
                f"locked with detectable controls (easy-positive AUC over the limit {override['limit']:.2f}: {over}) "
                f"because: {override['reason']}"
            )
        if too_few := override.get("too_few"):
            unknown = "; ".join(f"{transformation_title(name)}: {reason}" for name, reason in too_few.items())
            lines.append(f"locked without a detectability estimate ({unknown}) because: {override['reason']}")
    return lines
