import json
from dataclasses import asdict

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser

from core.commands import ShiftlabCommand
from core.projects import user_by_name
from corpora.models import Dataset
from corpora.selectors import dataset_get
from evaluation.augmented import VariantCoverage
from evaluation.encoders import get_encoder
from evaluation.services import DEFAULT_SEED, EncoderComparison, dataset_compare, dataset_evaluate, variant_coverage


class Command(ShiftlabCommand):
    help = (
        "Score an embedding model on a dataset with the MTEB protocol of its task type. Prints the main "
        "score (e.g. 0.8203), or every metric with --json. With --baseline (sts/str datasets), scores both "
        "models and prints their difference with a paired bootstrap 95% interval over pairs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="Dataset name (see: manage.py corpora list).")
        parser.add_argument(
            "--model",
            default="default",
            help="Alias in EVALUATION_ENCODERS, or a model: all-MiniLM-L6-v2, a Hugging Face id or a local folder.",
        )
        parser.add_argument("--split", default="test", help="Split to score (default: test).")
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="Seed of seeded protocols (default 42).")
        parser.add_argument("--batch-size", type=int, help="Encoding batch size (default: the encoder's).")
        parser.add_argument("--json", action="store_true", help="Print every metric as JSON.")
        parser.add_argument(
            "--baseline",
            help="Compare --model with this alias or model on the same pairs (sts/str datasets): both scores, "
            "the difference (model - baseline) and its paired bootstrap 95%% CI, seeded by --seed.",
        )
        parser.add_argument("--resamples", type=int, default=1000, help="Bootstrap resamples for --baseline.")
        self.add_actor_argument(parser)

    def handle(self, *args, **o):
        try:
            self._evaluate(o)
        except ImproperlyConfigured as exc:  # EVALUATION_ENCODERS cannot serve the model named
            raise CommandError(str(exc)) from None

    def _evaluate(self, o) -> None:
        user = user_by_name(o["actor"]) if o["actor"] else None
        try:
            dataset = dataset_get(name=o["dataset"], user=user)
        except Dataset.DoesNotExist:
            raise CommandError(f"No dataset named {o['dataset']!r}. See: python manage.py corpora list") from None
        if o["baseline"]:
            return self._compare(dataset, o)
        encoder = get_encoder(o["model"])
        result = dataset_evaluate(encoder_alias_or_model=o["model"], **_common(dataset, o))
        coverage = variant_coverage(dataset=dataset, split=o["split"], encoder=encoder)
        if o["json"]:
            document = {
                "dataset": dataset.name,
                "dataset_content_hash": dataset.content_hash,
                "task_type": dataset.task_type,
                "split": o["split"],
                "model_id": encoder.model_id,
                "revision": encoder.revision,
                "seed": o["seed"],
                "main_metric": result.main_metric,
                "main_score": result.main_score,
                "metrics": result.metrics(),
            }
            if coverage is not None:
                document["variant_coverage"] = asdict(coverage)
            self.stdout.write(json.dumps(document, indent=2))
            return
        # The context goes to stderr so that stdout holds just the number, for scripts.
        context = f"{dataset.name} [{o['split']}] {encoder.model_id}: {result.main_metric}"
        if coverage is not None:
            context += f" ({_coverage_line(coverage)})"
        self.stderr.write(context, style_func=str)
        self.stdout.write(f"{result.main_score:.4f}")

    def _compare(self, dataset: Dataset, o) -> None:
        if o["resamples"] < 1:
            raise CommandError("--resamples must be a positive number of bootstrap resamples, e.g. 1000.")
        comparison = dataset_compare(
            model=o["model"], baseline=o["baseline"], n_resamples=o["resamples"], **_common(dataset, o)
        )
        if o["json"]:
            self.stdout.write(json.dumps(asdict(comparison), indent=2))
            return
        self.stdout.write(_comparison_text(comparison))


def _common(dataset: Dataset, o) -> dict:
    """What scoring one model and comparing two take alike."""
    return {"dataset": dataset, "split": o["split"], "seed": o["seed"], "batch_size": o["batch_size"]}


def _coverage_line(coverage: VariantCoverage) -> str:
    return (
        f"variants: {coverage.variants} for {coverage.texts} texts, {coverage.incomplete} lacking a requested "
        f"variant, {coverage.without_variants} without any"
    )


def _comparison_text(c: EncoderComparison) -> str:
    r = c.result
    width = max(len(c.model), len(c.baseline))
    lines = [
        f"{c.dataset} [{c.split}], {c.metric}, {r.n} pairs",
        f"  {c.model:<{width}}  {r.spearman_a:.4f}  {c.model_id}",
        f"  {c.baseline:<{width}}  {r.spearman_b:.4f}  {c.baseline_id}",
        f"  difference {r.difference:+.4f}, {r.confidence:.0%} CI [{r.ci_low:+.4f}, {r.ci_high:+.4f}] "
        f"(paired bootstrap over pairs, {r.n_resamples} resamples, seed {c.seed})",
    ]
    for name, coverage in ((c.model, c.model_coverage), (c.baseline, c.baseline_coverage)):
        if coverage is not None:
            lines.append(f"  {name}: {_coverage_line(coverage)}")
    return "\n".join(lines)
