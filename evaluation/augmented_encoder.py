"""An encoder that embeds each text with k generated variants of it and pools them (SPEC §7).

Configured like any encoder (``EVALUATION_ENCODERS`` or ``SHIFTLAB_ENCODERS``)::

    "minilm-para": {
        "BACKEND": "evaluation.augmented_encoder.AugmentedEncoder",
        "OPTIONS": {"base": "all-MiniLM-L6-v2", "transformations": ["paraphrase"], "k": 1,
                    "seeds": [1], "pooling": "mean", "missing": "error"},
    }

Variants are not generated here: they are read from the transformation cache, i.e. the successful
``TransformedItem`` outputs (``ok``) whose ``source_text`` equals the text, in *succeeded* runs of
the chosen transformations, either with the chosen seeds (for each seed the newest such run that
has the text wins) or from explicit ``runs``. ``random_keywords`` needs no LLM and no run: its
variants are computed with ``transforms.planning.random_keywords`` and the seed. For each text and
transformation the first ``k`` variants in seed (or run) order are used.

Originals and variants are encoded by the base encoder through the embedding cache, so no text is
ever encoded twice for the same base model. ``revision`` hashes the base revision, the options and
the variant source (the selected runs' ids, hashes and output counts): it changes whenever the
pooled vectors could, so caches keyed by ``model_id`` + ``revision`` stay right.

The variant source is looked up again each time ``revision`` is read, and ``encode`` uses the
source of the last such look-up. ``encode_cached`` reads ``revision`` right before it calls
``encode``, so the vectors it files under a revision were computed from that revision's variants,
and a run that finishes while the process lives is picked up by the next evaluation.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Count, Q

from core.hashing import sha256_json, sha256_text
from core.models import TrackedJob
from evaluation.augmented import POOLINGS, VariantCoverage, is_unit_norm, pool_embeddings
from evaluation.embedding_cache import encode_cached
from evaluation.encoders import Encoder, EncoderError, get_encoder
from transforms.models import TransformedItem, TransformRun
from transforms.planning import KEYWORD_SAMPLINGS, KeywordSampling, random_keywords
from transforms.registry import TRANSFORMATIONS, LanguagePlan

# Transformations whose outputs stay in the text's language: variants of the same text.
AUGMENTING_TRANSFORMATIONS = tuple(
    name
    for name, spec in TRANSFORMATIONS.items()
    if spec.language_plan in (LanguagePlan.SAME, LanguagePlan.PIVOT_PER_TEXT)
)
COMPUTED_TRANSFORMATIONS = ("random_keywords",)  # variants computed here, without an LLM or a run
MISSING_POLICIES = ("error", "original")
# Bump when the way variants are chosen or pooled changes: old cached outputs become unreachable.
METHOD_VERSION = 1


@dataclass(frozen=True)
class _Slot:
    """Where one candidate variant of each text comes from: a seed or an explicit run of one
    transformation, read from ``run_ids`` (newest first) or computed for ``seed``."""

    transformation: str
    seed: int | None
    run_ids: tuple[int, ...]


@dataclass(frozen=True)
class _Source:
    slots: tuple[_Slot, ...]
    identity: tuple
    """What the variants depend on besides the texts (hashed into the revision)."""


class AugmentedEncoder:
    """Embeds each text and up to ``k`` variants per transformation with a base encoder, then
    pools them (see ``evaluation.augmented``).

    Options: ``base`` (alias or model, default "default"); ``transformations`` (any of
    AUGMENTING_TRANSFORMATIONS, default ["paraphrase"]); ``k`` (variants per text and
    transformation, default 1); ``seeds`` (run seeds in order of preference, default 1..k);
    ``runs`` (explicit succeeded run ids, in order of preference, instead of seeds for the LLM
    transformations); ``generator`` (with seeds: read only runs by this LLM model); ``pooling``
    ("mean", "weighted" or "max"); ``weight`` (the original's share for "weighted", in [0, 1]; 0 is
    "variants only"); ``keyword_sampling`` (how random_keywords draws: "default", or
    "augmentation-paper" for the paper's 16.1 of 58.2 words without punctuation);
    ``missing`` ("error": refuse texts lacking a variant, naming the command that generates them;
    "original": pool what exists); ``batch_size`` (for the base).
    """

    def __init__(
        self,
        *,
        alias: str,
        base: str = "default",
        transformations: Sequence[str] = ("paraphrase",),
        k: int = 1,
        seeds: Sequence[int] | None = None,
        runs: Sequence[int] | None = None,
        generator: str | None = None,
        pooling: str = "mean",
        weight: float | None = None,
        missing: str = "error",
        batch_size: int | None = None,
        keyword_sampling: str = "default",
    ):
        where = f"EVALUATION_ENCODERS[{alias!r}]['OPTIONS']"
        if not isinstance(base, str) or not base.strip():
            raise ImproperlyConfigured(f"{where}['base'] must name the encoder to augment (an alias or a model).")
        if base.strip() == alias:
            raise ImproperlyConfigured(f"{where}['base'] is the alias itself: name another alias or a model.")
        if isinstance(transformations, str) or not transformations:
            raise ImproperlyConfigured(f"{where}['transformations'] must be a non-empty list, e.g. ['paraphrase'].")
        unknown = [t for t in transformations if t not in AUGMENTING_TRANSFORMATIONS]
        if unknown or len(set(transformations)) != len(transformations):
            raise ImproperlyConfigured(
                f"{where}['transformations'] must list distinct transformations that keep the text's language "
                f"({', '.join(AUGMENTING_TRANSFORMATIONS)}); got {list(transformations)!r}."
            )
        if not _is_int(k) or k < 1:
            raise ImproperlyConfigured(f"{where}['k'] must be a positive integer (variants per transformation).")
        if seeds is None:
            seeds = list(range(1, k + 1))
        if not _distinct_ints(seeds):
            raise ImproperlyConfigured(f"{where}['seeds'] must be a list of distinct integers, got {seeds!r}.")
        if runs is None and len(seeds) < k:
            raise ImproperlyConfigured(f"{where}: k={k} variants per transformation need at least {k} seeds.")
        if runs is not None and not (_distinct_ints(runs) and runs and all(r > 0 for r in runs)):
            raise ImproperlyConfigured(f"{where}['runs'] must be a non-empty list of distinct run ids, got {runs!r}.")
        if generator is not None and (not isinstance(generator, str) or not generator.strip() or runs is not None):
            raise ImproperlyConfigured(
                f"{where}['generator'] must name the LLM of the runs to read (e.g. "
                "'qwen2.5-coder-1.5b-instruct'), and only with seeds, not runs."
            )
        _check_pooling(where, pooling=pooling, weight=weight, keyword_sampling=keyword_sampling, missing=missing)
        if batch_size is not None and (not _is_int(batch_size) or batch_size < 1):
            raise ImproperlyConfigured(f"{where}['batch_size'] must be a positive integer or None.")
        self.alias = alias
        self.base = base.strip()
        self.transformations = tuple(transformations)
        self.k = k
        self.seeds = tuple(seeds)
        self.runs = tuple(runs) if runs is not None else None
        self.generator = generator.strip() if generator is not None else None
        self.pooling = pooling
        self.weight = float(weight) if weight is not None else None
        self.missing = missing
        self.batch_size = batch_size
        self.keyword_sampling = keyword_sampling
        self.texts_missing_variants = 0
        """Texts encoded so far (cache misses only) that lacked a requested variant."""
        self._source: _Source | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<AugmentedEncoder {self.alias!r} base={self.base!r} {'+'.join(self.transformations)} k={self.k}>"

    @cached_property
    def base_encoder(self) -> Encoder:
        encoder = get_encoder(self.base)
        if isinstance(encoder, AugmentedEncoder):
            raise ImproperlyConfigured(
                f"EVALUATION_ENCODERS[{self.alias!r}]['OPTIONS']['base'] is {self.base!r}, itself an augmented "
                "encoder: augment a plain model instead."
            )
        return encoder

    @property
    def model_id(self) -> str:
        return f"augmented:{self.base_encoder.model_id}"

    @property
    def revision(self) -> str:
        source = self._refresh_source()
        return sha256_json(
            {
                "method": METHOD_VERSION,
                "base_model_id": self.base_encoder.model_id,
                "base_revision": self.base_encoder.revision,
                "options": self.options,
                "source": source.identity,
            }
        )

    @property
    def options(self) -> dict:
        """The options that shape the output (for the revision and for reports)."""
        options = {
            "transformations": list(self.transformations),
            "k": self.k,
            "seeds": list(self.seeds),
            "runs": list(self.runs) if self.runs is not None else None,
            "generator": self.generator,
            "pooling": self.pooling,
            "weight": self.weight,
            "missing": self.missing,
        }
        if self.keyword_sampling != "default":  # absent by default: revisions made before it stay valid
            options["keyword_sampling"] = self.keyword_sampling
        return options

    @property
    def prompts(self) -> Mapping[str, str]:
        return self.base_encoder.prompts

    @property
    def similarity_fn_name(self) -> str:
        return self.base_encoder.similarity_fn_name

    def encode(
        self, texts: Sequence[str], *, batch_size: int | None = None, prompt_name: str | None = None
    ) -> np.ndarray:
        texts = list(texts)
        unique = list(dict.fromkeys(texts))
        variants, incomplete = self._variants(unique, self._current_source())
        if incomplete and self.missing == "error":
            raise EncoderError(self._missing_message(incomplete, len(unique)))
        with self._lock:
            self.texts_missing_variants += len(incomplete)
        owners = [row for row, found in enumerate(variants) for _ in found]
        flat = [variant for found in variants for variant in found]
        vectors = encode_cached(
            self.base_encoder, [*unique, *flat], prompt_name=prompt_name, batch_size=batch_size or self.batch_size
        )
        originals, variant_vectors = vectors[: len(unique)], vectors[len(unique) :]
        pooled = pool_embeddings(
            originals,
            variant_vectors,
            owners,
            pooling=self.pooling,
            weight=self.weight,
            normalise=len(vectors) > 0 and is_unit_norm(vectors),
        )
        row_of = {text: row for row, text in enumerate(unique)}
        return pooled[[row_of[text] for text in texts]] if texts else pooled

    def coverage(self, texts: Sequence[str]) -> VariantCoverage:
        """How many of ``texts`` have their variants, without encoding anything."""
        unique = list(dict.fromkeys(texts))
        variants, incomplete = self._variants(unique, self._refresh_source())
        return VariantCoverage(
            texts=len(unique),
            incomplete=len(incomplete),
            without_variants=sum(1 for found in variants if not found),
            variants=sum(len(found) for found in variants),
        )

    def close(self) -> None:
        """Nothing to release: the base encoder is shared (``get_encoder``) and stops with it."""

    # --- variant source ---------------------------------------------------------------------

    def _current_source(self) -> _Source:
        with self._lock:
            source = self._source
        return source if source is not None else self._refresh_source()

    def _refresh_source(self) -> _Source:
        source = self._resolve_source()
        with self._lock:
            self._source = source
        return source

    def _resolve_source(self) -> _Source:
        llm = [t for t in self.transformations if t not in COMPUTED_TRANSFORMATIONS]
        slots: list[_Slot] = []
        if self.runs is not None:
            runs = self._explicit_runs(llm)
            slots = [_Slot(run.transformation, None, (run.pk,)) for run in runs]
        elif llm:
            succeeded = TransformRun.objects.filter(
                transformation__in=llm, seed__in=self.seeds, status=TrackedJob.Status.SUCCEEDED
            ).order_by("-pk")
            if self.generator is not None:
                succeeded = succeeded.filter(generator__model=self.generator)
            found: dict[tuple[str, int], list[int]] = {}
            for pk, transformation, seed in succeeded.values_list("pk", "transformation", "seed"):
                found.setdefault((transformation, seed), []).append(pk)
            slots = [_Slot(t, s, tuple(found.get((t, s), ()))) for t in llm for s in self.seeds]
        slots += [_Slot(t, s, ()) for t in self.transformations if t in COMPUTED_TRANSFORMATIONS for s in self.seeds]
        run_ids = sorted({pk for slot in slots for pk in slot.run_ids})
        counted = (
            TransformRun.objects.filter(pk__in=run_ids)
            .annotate(n_ok=Count("outputs", filter=Q(outputs__ok=True)))
            .values_list("pk", "run_hash", "n_ok")
        )
        identity = (
            tuple((s.transformation, s.seed, s.run_ids) for s in slots),
            tuple(sorted(counted)),
        )
        return _Source(tuple(slots), identity)

    def _explicit_runs(self, llm: Sequence[str]) -> list[TransformRun]:
        where = f"EVALUATION_ENCODERS[{self.alias!r}]['OPTIONS']['runs']"
        by_id = TransformRun.objects.in_bulk(self.runs)
        for pk in self.runs:
            run = by_id.get(pk)
            if run is None:
                raise EncoderError(
                    f"{where} names transformation run {pk}, which does not exist "
                    "(see: python manage.py shell, or the runs page)."
                )
            if run.transformation not in llm:
                raise EncoderError(
                    f"{where}: run {pk} is a {run.transformation} run, but the LLM transformations"
                    f" are {', '.join(llm) or 'none'}: add it or leave the run out."
                )
            if run.status != TrackedJob.Status.SUCCEEDED:
                raise EncoderError(
                    f"{where}: run {pk} has not succeeded (status {run.status}, {run.done}/{run.total} texts): wait "
                    f"for it (python manage.py transform --run {pk} --wait), resume it (--resume), or leave it out."
                )
        for transformation in llm:
            n = sum(1 for pk in self.runs if by_id[pk].transformation == transformation)
            if n < self.k:
                raise EncoderError(
                    f"{where} gives {n} {transformation} run(s) but k={self.k} variants per "
                    "transformation are asked for: list more runs or lower k."
                )
        return [by_id[pk] for pk in self.runs]

    def _variants(self, texts: Sequence[str], source: _Source) -> tuple[list[list[str]], list[str]]:
        """The variants of each text (up to k per transformation, in slot order) and the texts
        that have fewer than k for some transformation."""
        wanted = set(texts)
        run_ids = {pk for slot in source.slots for pk in slot.run_ids}
        outputs: dict[tuple[int, str], str] = {}
        if run_ids and wanted:
            rows = TransformedItem.objects.filter(run_id__in=run_ids, ok=True).exclude(output_text="")
            for run_id, source_text, output in rows.values_list("run_id", "source_text", "output_text").iterator():
                if source_text in wanted:
                    outputs.setdefault((run_id, source_text), output)
        variants: list[list[str]] = []
        incomplete: list[str] = []
        sampling = KEYWORD_SAMPLINGS[self.keyword_sampling]
        for text in texts:
            found: list[str] = []
            short = False
            for transformation in self.transformations:
                candidates = (
                    _slot_variant(slot, text, outputs, sampling)
                    for slot in source.slots
                    if slot.transformation == transformation
                )
                chosen = [variant for variant in candidates if variant][: self.k]
                short = short or len(chosen) < self.k
                found.extend(chosen)
            variants.append(found)
            if short:
                incomplete.append(text)
        return variants, incomplete

    def _missing_message(self, incomplete: Sequence[str], n_texts: int) -> str:
        example = incomplete[0] if len(incomplete[0]) <= 80 else incomplete[0][:77] + "..."
        llm = [t for t in self.transformations if t not in COMPUTED_TRANSFORMATIONS]
        if self.runs is not None:
            how = f"runs {', '.join(map(str, self.runs))} do not cover them"
        elif not llm:
            how = "random_keywords finds no word in them"
        else:
            how = " and ".join(
                f"python manage.py transform --dataset <their dataset> --transformation {t} --seed {s} --wait"
                for t in llm
                for s in self.seeds[: self.k]
            )
            how = f"generate them with: {how} (only succeeded runs count)"
            unfinished = TransformRun.objects.filter(transformation__in=llm, seed__in=self.seeds).exclude(
                status=TrackedJob.Status.SUCCEEDED
            )
            if self.generator is not None:
                unfinished = unfinished.filter(generator__model=self.generator)
            waiting = [
                f"run {r.pk} ({r.transformation}, seed {r.seed}) is {r.status}, {r.done}/{r.total} texts"
                for r in unfinished.order_by("pk")
            ]
            if waiting:
                how += f"; {'; '.join(waiting)}: wait for it (python manage.py transform --run ID --wait)"
        return (
            f"Encoder {self.alias!r}: {len(incomplete)} of {n_texts} texts lack some of their {self.k} "
            f"{'/'.join(self.transformations)} variant(s) per transformation (e.g. {example!r}); {how}. "
            f"Or set EVALUATION_ENCODERS[{self.alias!r}]['OPTIONS']['missing'] = 'original' to pool the variants "
            "that exist (a text without any keeps its plain embedding)."
        )


def _slot_variant(
    slot: _Slot, text: str, outputs: Mapping[tuple[int, str], str], sampling: KeywordSampling
) -> str | None:
    if slot.transformation == "random_keywords":
        return random_keywords(text, seed=slot.seed, text_hash=sha256_text(text), sampling=sampling) or None
    return next((outputs[(pk, text)] for pk in slot.run_ids if (pk, text) in outputs), None)


def _check_pooling(where: str, *, pooling: str, weight: float | None, keyword_sampling: str, missing: str) -> None:
    """How an augmented encoder pools, draws keywords and treats texts without variants: refused
    (``ImproperlyConfigured``, naming the option of ``where``) unless valid."""
    if pooling not in POOLINGS:
        raise ImproperlyConfigured(f"{where}['pooling'] is {pooling!r}: use one of {', '.join(POOLINGS)}.")
    if pooling == "weighted" and (
        isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1
    ):
        raise ImproperlyConfigured(
            f"{where}['weight'] must be a number in [0, 1] for weighted pooling "
            f"(the original's share; 0 for the variants only), got {weight!r}."
        )
    if pooling != "weighted" and weight is not None:
        raise ImproperlyConfigured(
            f"{where}['weight'] applies to pooling 'weighted' only: remove it or set pooling to 'weighted'."
        )
    if keyword_sampling not in KEYWORD_SAMPLINGS:
        raise ImproperlyConfigured(
            f"{where}['keyword_sampling'] is {keyword_sampling!r}: use one of {', '.join(KEYWORD_SAMPLINGS)}."
        )
    if missing not in MISSING_POLICIES:
        raise ImproperlyConfigured(f"{where}['missing'] is {missing!r}: use one of {', '.join(MISSING_POLICIES)}.")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _distinct_ints(values: object) -> bool:
    return isinstance(values, list | tuple) and all(_is_int(v) for v in values) and len(set(values)) == len(values)
