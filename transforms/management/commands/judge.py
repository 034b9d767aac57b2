import json
from dataclasses import asdict

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from core.errors import ShiftlabError
from datasets.models import Dataset
from transforms.judge_services import JudgeParams, judge_evaluate


class Command(BaseCommand):
    help = "The LLM judge. `judge evaluate`: agreement of the judge's similarity scores with STS gold scores."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        evaluate = sub.add_parser("evaluate", help="Spearman overall and per length bin, MAE per gold bucket.")
        evaluate.add_argument("--dataset", required=True, help="An sts or str dataset.")
        evaluate.add_argument("--limit", type=int, help="Only the first N pairs.")
        evaluate.add_argument("--split", help="Only this split.")
        evaluate.add_argument("--backend", default="default", help="Alias in TRANSFORM_BACKENDS.")
        evaluate.add_argument("--seed", type=int, default=0)
        evaluate.add_argument("--temperature", type=float, default=JudgeParams.temperature)
        evaluate.add_argument("--max-attempts", type=int, default=JudgeParams.max_attempts)
        evaluate.add_argument("--json", action="store_true")

    def handle(self, *args, **o):
        try:
            dataset = Dataset.objects.get(name=o["dataset"])
        except Dataset.DoesNotExist:
            raise CommandError(f"No dataset named {o['dataset']!r}. See: python manage.py datasets list") from None
        params = JudgeParams(temperature=o["temperature"], max_attempts=o["max_attempts"])
        try:
            result = judge_evaluate(dataset=dataset, limit=o["limit"], split=o["split"], backend_alias=o["backend"],
                                    seed=o["seed"], params=params)  # fmt: skip
        except (ShiftlabError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from None
        if o["json"]:
            self.stdout.write(json.dumps(asdict(result), indent=2))
            return
        fmt = lambda v: "n/a" if v is None else f"{v:.4f}"  # noqa: E731
        self.stdout.write(f"Judge on {dataset.name}: {result.n} pairs, {result.n_parsed} parsed "
                          f"(parse failures {result.parse_failure_rate:.1%})")  # fmt: skip
        self.stdout.write(f"Spearman overall: {fmt(result.spearman)}   MAE: {fmt(result.mae)}")
        self.stdout.write("Spearman by length of the longer sentence (words):")
        for label, b in result.by_length.items():
            self.stdout.write(f"  {label:<8} n={b.n:<5} {fmt(b.value)}")
        self.stdout.write("MAE by gold score:")
        for label, b in result.mae_by_gold.items():
            self.stdout.write(f"  {label:<8} n={b.n:<5} {fmt(b.value)}")
