import json

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ShiftlabError
from datasets.models import Dataset
from evaluation.encoders import get_encoder
from evaluation.services import DEFAULT_SEED, dataset_evaluate


class Command(BaseCommand):
    help = (
        "Score an embedding model on a dataset with the MTEB protocol of its task type. Prints the main "
        "score (e.g. 0.8203), or every metric with --json."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="Dataset name (see: manage.py datasets list).")
        parser.add_argument(
            "--model",
            default="default",
            help="Alias in EVALUATION_ENCODERS, or a model: all-MiniLM-L6-v2, a Hugging Face id or a local folder.",
        )
        parser.add_argument("--split", default="test", help="Split to score (default: test).")
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="Seed of seeded protocols (default 42).")
        parser.add_argument("--batch-size", type=int, help="Encoding batch size (default: the encoder's).")
        parser.add_argument("--json", action="store_true", help="Print every metric as JSON.")

    def handle(self, *args, **o):
        try:
            dataset = Dataset.objects.get(name=o["dataset"])
        except Dataset.DoesNotExist:
            raise CommandError(f"No dataset named {o['dataset']!r}. See: python manage.py datasets list") from None
        try:
            encoder = get_encoder(o["model"])
            result = dataset_evaluate(
                dataset=dataset, encoder_alias_or_model=o["model"], split=o["split"], seed=o["seed"],
                batch_size=o["batch_size"],
            )  # fmt: skip
        except (ShiftlabError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from None
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
            self.stdout.write(json.dumps(document, indent=2))
            return
        # The context goes to stderr so that stdout holds just the number, for scripts.
        context = f"{dataset.name} [{o['split']}] {encoder.model_id}: {result.main_metric}"
        self.stderr.write(context, style_func=str)
        self.stdout.write(f"{result.main_score:.4f}")
