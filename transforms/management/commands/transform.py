from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from core.errors import ShiftlabError
from core.progress import follow_job
from corpora.models import Dataset
from transforms.models import TransformRun
from transforms.registry import TRANSFORMATIONS
from transforms.selectors import transform_run_summary
from transforms.services import GenerationParams, transform_run_create, transform_run_export, transform_run_resume


class Command(BaseCommand):
    help = (
        "Run an LLM transformation over a dataset (queued on Celery, or in-process without a broker). "
        "Outputs already in the generation cache are reused without calling the LLM."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dataset", help="Dataset name (see: manage.py corpora list).")
        parser.add_argument("--transformation", choices=list(TRANSFORMATIONS))
        parser.add_argument("--seed", type=int, default=1337)
        parser.add_argument("--backend", default="default", help="Alias in TRANSFORM_BACKENDS (default: default).")
        parser.add_argument("--limit", type=int, help="Only the first N items.")
        parser.add_argument("--languages", help="Comma-separated target/pivot languages (default: es,fr,de,tr,ar).")
        parser.add_argument("--temperature", type=float, default=GenerationParams.temperature)
        parser.add_argument("--top-p", type=float, default=GenerationParams.top_p)
        parser.add_argument("--max-tokens", type=int, default=GenerationParams.max_tokens)
        parser.add_argument("--max-attempts", type=int, default=GenerationParams.max_attempts)
        parser.add_argument("--wait", action="store_true", help="Show progress until the run ends.")
        parser.add_argument("--export", metavar="PATH", help="Export a run's transformed dataset (with --run).")
        parser.add_argument("--run", type=int, help="An existing run (for --export, --wait or --resume).")
        parser.add_argument("--resume", action="store_true", help="Queue the texts of --run that have no outcome.")

    def handle(self, *args, **o):
        if o["resume"] and not o["run"]:
            raise CommandError("--resume needs --run RUN_ID")
        if o["run"]:
            run = self._get_run(o["run"])
            if o["resume"]:
                run = transform_run_resume(run_id=run.pk)
                self.stdout.write(f"Run {run.pk} resumed: {run.total - run.done} texts to go")
        else:
            run = self._create(o)
        if o["wait"] or o["export"]:
            run = self._wait(run)
        if o["export"]:
            result = transform_run_export(run=run, path=o["export"])
            self.stdout.write(f"Exported {result.n_items} items to {result.path} ({result.n_skipped} left out: failed)")

    def _create(self, o) -> TransformRun:
        if not o["dataset"] or not o["transformation"]:
            raise CommandError("--dataset and --transformation are required to start a run")
        try:
            dataset = Dataset.objects.get(name=o["dataset"])
        except Dataset.DoesNotExist:
            raise CommandError(f"No dataset named {o['dataset']!r}. See: python manage.py corpora list") from None
        try:
            params = GenerationParams(
                temperature=o["temperature"],
                top_p=o["top_p"],
                max_tokens=o["max_tokens"],
                max_attempts=o["max_attempts"],
            )
            languages = [c.strip() for c in o["languages"].split(",")] if o["languages"] else None
            run = transform_run_create(
                dataset=dataset,
                transformation=o["transformation"],
                seed=o["seed"],
                backend_alias=o["backend"],
                params=params,
                languages=languages,
                limit=o["limit"],
            )
        except (ShiftlabError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Run {run.pk}: {run.transformation} on {dataset.name}, {run.total} texts, seed {run.seed}"
            + (f", target {run.run_language}" if run.run_language else "")
        )
        return run

    def _get_run(self, run_id: int) -> TransformRun:
        try:
            return TransformRun.objects.get(pk=run_id)
        except TransformRun.DoesNotExist:
            raise CommandError(f"No run {run_id}") from None

    def _wait(self, run: TransformRun) -> TransformRun:
        run = follow_job(run, self.stdout.write)
        summary = transform_run_summary(run=run)
        rates = ", ".join(f"{k} {v:.1%}" for k, v in summary.error_rates.items()) or "none"
        edit = f"{summary.mean_edit_distance:.3f}" if summary.mean_edit_distance is not None else "n/a"
        self.stdout.write(
            f"Run {run.pk} {run.status}: {run.done}/{run.total} texts, failed {summary.error_rate:.1%} ({rates}); "
            f"mean edit distance {edit}; LLM calls {run.llm_calls}, cache hits {run.cache_hits}"
        )
        if run.status == TransformRun.Status.FAILED:
            raise CommandError(run.error or "the run failed")
        return run
