"""How easily control items can be told from real items: the old construction against the new one
(issue 14), on real transformation runs made by the embedded LLM.

Usage: .venv/bin/python benchmarks/control_detectability.py [--pairs 30] [--items 40] [--seeds 5]
           [--model qwen2.5-coder-1.5b-instruct] [--data-dir DIR]
           [--all-transformations [--generate-only] [--shared-data DIR]]

Runs paraphrase and summarisation with the embedded llama.cpp server over ``--pairs`` pairs of
STS-B (English test set, from ../shared/data; the demo STS fixture when that is absent), in a
fresh SQLite database under ``--data-dir`` (default: a new temporary folder) with Celery in eager
mode. Two study layouts:

- *same sources*: both transformations over the same first ``--pairs`` pairs, so every source
  text recurs in up to two real items (the usual layout);
- *disjoint sources*: paraphrase over those pairs, summarisation over the next ``--pairs``
  pairs (a second dataset holding that slice, written to the data folder), so no real text recurs.

For each layout and each of ``--seeds`` study seeds it locks a study of ``--items`` items per
transformation (batches of 5 real items with 2 controls each, so there are many controls to
cross-validate) and prints the cross-validated AUC of ``annotation.science.detectability`` (0.5 =
indistinguishable), and the easy-positive AUC without the shared-text feature and without the
near-miss feature (issue 30), for (locked with an override, so that a lock the limit refuses is
measured too):

- OLD: the construction before issue 14, reproduced here: easy positive = a sampled source
  against itself minus its final full stop; easy negative = a sampled source against the output
  of the sampled item with the least word overlap;
- NEW: the controls ``study_lock`` draws now (``annotation.science.controls``/``control_services``).

Both use the same real items. The issue's goal: easy-positive AUC ≤ 0.75 with the new construction.
``--all-transformations`` (issue 27): every transformation of ``transforms/registry.py`` over the
first ``--pairs`` pairs of STS-B (``--shared-data`` names the shared/data folder when it is not
next to the checkout), with gold translation pairs (STS-B sentences against their stsb-multi-mt
translations, rows never transformed) imported for the translations; runs already in
``--data-dir`` are reused (``--generate-only`` makes them and stops). Then one study per
transformation and seed (up to ``--items`` real items, 4 controls per 5) is locked with an
override and deleted again, so each is measured as the first study of its project; it prints the
easy-positive and easy-negative AUC and whether the default limit (0.75) would refuse the lock.

The model is fetched into ``var/models`` on first use (``make models``); SmolLM2
(``smollm2-135m-instruct``) is faster but mostly copies its input.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STSB = ROOT.parent / "shared" / "data" / "stsb-multi-mt" / "stsb-en-test.csv"
DEMO_STS = ROOT / "fixtures" / "sts" / "demo-sts.csv"
_WORD = re.compile(r"\w+", re.UNICODE)


# --- the OLD construction, as it was before issue 14 (for comparison only) ---------------------


def old_near_copy(text: str) -> str:
    stripped = text.rstrip()
    if stripped.endswith((".", "!", "?", "。")):
        return stripped[:-1].rstrip()
    return stripped + "."


def old_control_pairs(sources, outputs, n, rng):
    """(kind, text_a, text_b) of the old construction: alternating near copy and least-overlap negative."""

    def words(text):
        return frozenset(w.lower() for w in _WORD.findall(text))

    def overlap(a, b):
        union = a | b
        return len(a & b) / len(union) if union else 1.0

    order = rng.permutation(len(sources))
    source_words, output_words = [words(s) for s in sources], [words(o) for o in outputs]
    pairs = []
    for k in range(n):
        i = int(order[k % len(order)])
        if k % 2 == 0:
            pairs.append(("easy_positive", sources[i], old_near_copy(sources[i])))
        else:
            others = [j for j in range(len(sources)) if j != i and outputs[j].strip() != sources[i].strip()]
            j = min(others, key=lambda j: (overlap(source_words[i], output_words[j]), j))
            pairs.append(("easy_negative", sources[i], outputs[j]))
    return pairs


# --- the benchmark ----------------------------------------------------------------------------


def auc_without(records, feature: str, seed: int) -> float | None:
    """Easy positives vs real items, cross-validated like ``annotation.science.detectability`` but
    without one feature: how much of the AUC that feature carries."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from annotation.science.detectability import FEATURE_NAMES, features

    keep = [r for r in records if r.kind in ("real", "easy_positive")]
    y = np.array([r.kind == "easy_positive" for r in keep], dtype=int)
    if min(y.sum(), len(y) - y.sum()) < 5:
        return None
    x = np.delete(features(keep), FEATURE_NAMES.index(feature), axis=1)
    model = make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced", max_iter=1000))
    cv = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
    return float(np.mean(cross_val_score(model, x, y, cv=cv, scoring="roc_auc")))


# --- every transformation (issue 27): the controls study_lock draws, one study per transformation ---

PARALLEL_LANGUAGES = ("de", "es", "fr")  # stsb-multi-mt translations that serve as gold translation pairs


def _parallel_gold(root: Path, language: str, start: int, n: int, folder: Path) -> Path:
    """A cross-lingual STS file of STS-B sentences against their stsb-multi-mt translation (score 5):
    gold translation pairs from the rows ``start``..``start + n`` (never the transformed ones)."""
    import csv

    def first_sentences(lang):
        with (root / f"stsb-{lang}-test.csv").open(encoding="utf-8", newline="") as handle:
            return [row[0] for row in csv.reader(handle)]

    english, other = first_sentences("en"), first_sentences(language)
    path = folder / f"stsb-en-{language}-parallel.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        for a, b in list(zip(english, other, strict=True))[start : start + n]:
            writer.writerow([a, b, "5.0"])
    return path


def all_transformations(args) -> None:
    """Generate (or reuse) a run of every transformation over ``--pairs`` STS-B pairs, then lock one
    study per transformation and seed and print the detectability of the controls it drew."""
    import numpy as np
    from django.conf import settings

    from annotation.science.design import StudyDesign
    from annotation.studies.control_services import origin_label
    from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
    from core.errors import ShiftlabError
    from corpora.models import Dataset
    from corpora.services import ImportOptions, dataset_import
    from tests.support import roster_at_least
    from transforms.backends import reset_backends
    from transforms.embedded import LlamaServer, default_models_dir, ensure_model
    from transforms.models import TransformRun
    from transforms.params import GenerationParams
    from transforms.registry import TRANSFORMATIONS
    from transforms.services import transform_run_create
    from transforms.tasks import start_run

    stsb = Path(args.shared_data) / "stsb-multi-mt" / STSB.name if args.shared_data else STSB
    if not stsb.exists():
        raise SystemExit(f"{stsb} not found: this mode needs STS-B from shared/data (see --shared-data)")
    options = ImportOptions(columns=["sentence1", "sentence2", "score"])
    english = Dataset.objects.filter(name=stsb.stem).first() or dataset_import(
        source=stsb, task="sts", name=stsb.stem, options=options
    )
    for language in PARALLEL_LANGUAGES:
        name = f"stsb-en-{language}-parallel"
        if not Dataset.objects.filter(name=name).exists():
            path = _parallel_gold(stsb.parent, language, 4 * args.pairs, 300, Path(settings.DATA_DIR))
            dataset_import(
                source=path,
                task="sts",
                name=name,
                options=ImportOptions(language=f"en-{language}", columns=["sentence1", "sentence2", "score"]),
            )
    languages = {
        "translation": ["de"],
        "cross_translation": list(PARALLEL_LANGUAGES),
        "backtranslation": list(PARALLEL_LANGUAGES),
    }
    runs = {}
    for name in TRANSFORMATIONS:
        run = (
            TransformRun.objects.filter(
                dataset=english, transformation=name, item_limit=args.pairs, status=TransformRun.Status.SUCCEEDED
            )
            .order_by("-pk")
            .first()
        )
        if run is not None:
            runs[name] = run
    missing = [name for name in TRANSFORMATIONS if name not in runs]
    if missing:
        model_path = ensure_model(args.model, models_dir=default_models_dir())
        log = Path(settings.DATA_DIR) / "llama-server.log"
        with LlamaServer(model_path, model_alias=args.model, n_ctx=2048, log_path=log) as server:
            settings.TRANSFORM_BACKENDS = {
                "default": {
                    "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
                    "OPTIONS": {"base_url": server.base_url, "model": args.model, "max_concurrency": 2},
                }
            }
            reset_backends()
            for name in missing:
                started = time.perf_counter()
                run = transform_run_create(
                    dataset=english,
                    transformation=name,
                    seed=1337,
                    limit=args.pairs,
                    dispatch=False,
                    languages=languages.get(name),
                    params=GenerationParams(temperature=0.7, max_tokens=160, max_attempts=2),
                )
                start_run.delay(run.pk)
                run.refresh_from_db()
                print(
                    f"{name}: {run.outputs.filter(ok=True).count()} of {run.total} texts transformed "
                    f"({run.llm_calls} LLM calls, {time.perf_counter() - started:.0f} s, {args.model}, {run.status})",
                    flush=True,
                )
                runs[name] = run
    if args.generate_only:
        return
    print(
        f"\nOne study per transformation and seed: up to {args.items} real items, batches of 5 with 4 controls "
        f"(half easy positives), detectability limit 0.75. AUC = cross-validated ROC AUC of "
        "annotation.science.detectability (0.5 = indistinguishable); each study locks with an override, so that "
        "the AUC of a lock the limit refuses is shown too."
    )
    print(f"{'transformation':<22} {'seed':>4} {'n real':>6} {'n pos':>5} {'n neg':>5} {'pos':>5} {'neg':>5}  outcome")
    summary: dict[str, dict[str, list[float]]] = {}
    for name, run in runs.items():
        ok = run.outputs.filter(ok=True).exclude(output_text="").count()
        for seed in range(args.seeds):
            # The override lets every study lock, so that the AUC of those the limit refuses is printed too.
            design = StudyDesign(
                items_per_transformation=min(args.items, ok),
                batch_size=5,
                controls_per_batch=4,
                llm_judges=(),
                seed=seed,
                detectability_override="benchmark: measures detectability, nobody rates these studies",
            )
            roster_at_least(run.project, design.raters_per_item)  # a design needs its raters on the roster (issue 43)
            study = study_create(
                actor=None,
                request=StudyCreateRequest(
                    name=f"all-{name.replace('_', '-')}-{seed}-{time.time_ns()}", runs=[run], design=design
                ),
            )
            try:
                study = study_lock(study=study)
            except ShiftlabError as exc:  # too few candidates: no controls at all
                summary.setdefault(name, {}).setdefault("short", []).append(1.0)
                print(f"{name:<22} {seed:>4} {'':>6} {'':>5} {'':>5} {'':>5} {'':>5}  lock refused: {exc}", flush=True)
                continue
            result = study.sample_info["detectability"]
            pos, neg = result["easy_positive"], result["easy_negative"]
            refused = name in study.sample_info.get("detectability_override", {}).get("over_limit", {})
            if refused:
                summary.setdefault(name, {}).setdefault("refused", []).append(1.0)
            for kind, score in (("pos", pos), ("neg", neg)):
                if score["auc"] is not None:
                    summary.setdefault(name, {}).setdefault(kind, []).append(score["auc"])
            sources = study.sample_info.get("control_sources", {})
            where = "; ".join(
                f"{kind}: " + ", ".join(f"{origin_label(o)} {n}" for o, n in by.items()) for kind, by in sources.items()
            )
            study.delete()  # each study is measured as the first of its project (nothing of it is excluded later)
            cells = " ".join(f"{s['auc']:>5.2f}" if s["auc"] is not None else "  n/a" for s in (pos, neg))
            print(
                f"{name:<22} {seed:>4} {pos['n_real']:>6} {pos['n_controls']:>5} {neg['n_controls']:>5} {cells}"
                f"  {'REFUSED without the override' if refused else 'locked'} ({where})",
                flush=True,
            )
    print("\nMean ± SD over seeds of the easy-positive and easy-negative AUC (goal: ≤ 0.75, else locking refused)")
    for name, by in summary.items():
        cells = []
        for kind in ("pos", "neg"):
            values = by.get(kind, [])
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            cells.append(f"{kind} {np.mean(values):.2f} ± {sd:.2f} (n={len(values)})" if values else f"{kind} n/a")
        refused, short = len(by.get("refused", [])), len(by.get("short", []))
        print(
            f"  {name:<22} "
            + ", ".join(cells)
            + (f", over the limit (lock refused) for {refused} seed(s)" if refused else "")
            + (f", too few candidates (lock refused) for {short} seed(s)" if short else "")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=30, help="STS pairs transformed per run (two texts each).")
    parser.add_argument("--items", type=int, default=40, help="Items per transformation in each study.")
    parser.add_argument("--seeds", type=int, default=5, help="Studies locked per layout, one per seed 0..N-1.")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct", help="Embedded model name.")
    parser.add_argument("--data-dir", help="SHIFTLAB_DATA_DIR to use (default: a new temporary folder).")
    parser.add_argument(
        "--all-transformations",
        action="store_true",
        help="Every transformation of transforms/registry.py: one study each (runs in --data-dir are reused).",
    )
    parser.add_argument("--shared-data", help="The shared/data folder (default: ../shared/data next to the checkout).")
    parser.add_argument(
        "--generate-only", action="store_true", help="With --all-transformations: make the runs, lock nothing."
    )
    args = parser.parse_args()

    os.environ["SHIFTLAB_DATA_DIR"] = args.data_dir or tempfile.mkdtemp(prefix="shiftlab-controls-")
    os.environ.pop("CELERY_BROKER_URL", None)  # eager: runs execute in this process
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import numpy as np
    from django.conf import settings
    from django.core.management import call_command

    from annotation.science.design import StudyDesign
    from annotation.science.detectability import Record, control_detectability
    from annotation.science.sampling import seeded_rng
    from annotation.studies.control_services import origin_label, study_control_detectability
    from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
    from corpora.models import Dataset
    from corpora.services import ImportOptions, dataset_import
    from tests.support import roster_at_least
    from transforms.backends import reset_backends
    from transforms.embedded import LlamaServer, default_models_dir, ensure_model
    from transforms.params import GenerationParams
    from transforms.services import transform_run_create
    from transforms.tasks import start_run

    call_command("migrate", verbosity=0)
    if args.all_transformations:
        all_transformations(args)
        return
    columns = ["sentence1", "sentence2", "score"]
    source = STSB if STSB.exists() else DEMO_STS
    if source is DEMO_STS:
        print(f"{STSB} not found: using the demo STS fixture")
    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    header = lines[:1] if source is DEMO_STS else []  # STS-B has no header line
    rows = lines[len(header) :]
    second = Path(settings.DATA_DIR) / f"{source.stem}-second-slice.csv"
    second.write_text("\n".join(header + rows[args.pairs : 2 * args.pairs]) + "\n", encoding="utf-8")
    options = ImportOptions() if header else ImportOptions(columns=columns)
    datasets = {}
    for name, path in ((source.stem, source), (f"{source.stem}-second", second)):
        datasets[name] = Dataset.objects.filter(name=name).first() or dataset_import(
            source=path, task="sts", name=name, options=options
        )
    first_set, second_set = datasets.values()
    model_path = ensure_model(args.model, models_dir=default_models_dir())
    log = Path(settings.DATA_DIR) / "llama-server.log"
    runs = {}
    with LlamaServer(model_path, model_alias=args.model, n_ctx=2048, log_path=log) as server:
        settings.TRANSFORM_BACKENDS = {
            "default": {
                "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
                "OPTIONS": {"base_url": server.base_url, "model": args.model, "max_concurrency": 2},
            }
        }
        reset_backends()
        for key, dataset, transformation in (
            ("paraphrase", first_set, "paraphrase"),
            ("summarization", first_set, "summarization"),
            ("summarization-second", second_set, "summarization"),
        ):
            started = time.perf_counter()
            run = transform_run_create(
                dataset=dataset,
                transformation=transformation,
                seed=1337,
                limit=args.pairs,
                dispatch=False,
                params=GenerationParams(temperature=0.7, max_tokens=96, max_attempts=2),
            )
            start_run.delay(run.pk)
            run.refresh_from_db()
            print(
                f"{transformation} of {dataset.name}: {run.outputs.filter(ok=True).count()} of {run.total} texts "
                f"transformed ({run.llm_calls} LLM calls, {time.perf_counter() - started:.0f} s, {args.model})"
            )
            runs[key] = run

    layouts = {
        "same sources": [runs["paraphrase"], runs["summarization"]],
        "disjoint sources": [runs["paraphrase"], runs["summarization-second"]],
    }
    kinds = (
        "all",
        "easy_positive",
        "easy_negative",
        "easy_positive w/o shared_texts",
        "easy_positive w/o near_misses",
    )
    summary = {}
    for layout, layout_runs in layouts.items():
        print(f"\n{layout}: {' + '.join(f'{r.transformation} of {r.dataset.name}' for r in layout_runs)}")
        print(
            f"{'seed':>4} {'method':<6} {'n real':>6} {'n pos':>5} {'n neg':>5} {'all':>5} {'pos':>5} {'neg':>5} "
            f"{'pos w/o shared':>14} {'pos w/o near misses':>19}"
        )
        for seed in range(args.seeds):
            design = StudyDesign(
                items_per_transformation=args.items,
                batch_size=5,
                controls_per_batch=2,
                llm_judges=(),
                seed=seed,
                detectability_override="benchmark: measures detectability, nobody rates these studies",
            )
            name = f"controls-{seed}-{time.time_ns()}"
            roster_at_least(layout_runs[0].project, design.raters_per_item)
            study = study_lock(
                study=study_create(actor=None, request=StudyCreateRequest(name=name, runs=layout_runs, design=design))
            )
            real = list(study.items.filter(kind="real").order_by("transformation", "transformed_item_id"))
            n_controls = study.items.exclude(kind="real").count()
            old = old_control_pairs(
                [r.text_a for r in real], [r.text_b for r in real], n_controls, seeded_rng(seed, "controls")
            )
            real_records = [Record("real", r.text_a, r.text_b, r.language_a, r.language_b) for r in real]
            old_records = real_records + [
                Record(kind, a, b, real[0].language_a, real[0].language_a if kind == "easy_positive" else "")
                for kind, a, b in old
            ]
            new_records = [Record(i.kind, i.text_a, i.text_b, i.language_a, i.language_b) for i in study.items.all()]
            results = {
                "OLD": (control_detectability(old_records, rng=seeded_rng(seed, "detectability")), old_records),
                "NEW": (study_control_detectability(study=study), new_records),
            }
            for method, (result, records) in results.items():
                without = auc_without(records, "shared_texts", seed)
                no_near = auc_without(records, "near_misses", seed)
                values = (result.all.auc, result.easy_positive.auc, result.easy_negative.auc, without, no_near)
                for kind, value in zip(kinds, values, strict=True):
                    if value is not None:
                        summary.setdefault((layout, method), {}).setdefault(kind, []).append(value)
                print(
                    f"{seed:>4} {method:<6} {result.all.n_real:>6} {result.easy_positive.n_controls:>5} "
                    f"{result.easy_negative.n_controls:>5} "
                    + " ".join(f"{v:>5.2f}" if v is not None else "  n/a" for v in values[:3])
                    + (f" {without:>14.2f}" if without is not None else f" {'n/a':>14}")
                    + (f" {no_near:>19.2f}" if no_near is not None else f" {'n/a':>19}")
                )
            sources = study.sample_info.get("control_sources", {})
            print(
                "            NEW controls from: "
                + "; ".join(
                    f"{kind}: " + ", ".join(f"{origin_label(o)} {n}" for o, n in by.items())
                    for kind, by in sources.items()
                )
            )
    print("\nMean ± SD of the cross-validated AUC over seeds (0.5 = indistinguishable; goal: easy positives ≤ 0.75)")
    print("OLD = near copy + least-overlap negative (before issue 14); NEW = issue 14")
    for (layout, method), by_kind in summary.items():
        cells = []
        for kind in kinds:
            values = by_kind.get(kind, [])
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            cells.append(f"{kind} {np.mean(values):.3f} ± {sd:.3f}" if values else f"{kind} n/a")
        print(f"  {layout:<16} {method:<4} " + ", ".join(cells))


if __name__ == "__main__":
    main()
