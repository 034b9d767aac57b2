from django.core.management.base import CommandError

from core.commands import ShiftlabCommand
from core.progress import follow_job, job_status_lines
from core.projects import scoped, user_by_name
from transforms.export_services import transform_run_export
from transforms.models import TransformRun
from transforms.noise import NOISE_KINDS, SEVERITIES
from transforms.params import GenerationParams
from transforms.presets import PRESETS
from transforms.registry import TRANSFORMATIONS
from transforms.selectors import transform_run_summary
from transforms.services import (
    TransformRunResumeRequest,
    TransformRunsStartRequest,
    transform_run_resume,
    transform_runs_start,
)


class Command(ShiftlabCommand):
    help = (
        "Run an LLM transformation over a dataset (queued on Celery, or in-process without a broker). "
        "Outputs already in the generation cache are reused without calling the LLM. Without --as it acts "
        "as the system: it sees every project's datasets and runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dataset", help="Dataset name (see: manage.py corpora list).")
        parser.add_argument(
            "--transformation",
            choices=[*TRANSFORMATIONS, *NOISE_KINDS],
            help=f"A transformation, or a noise kind ({', '.join(NOISE_KINDS)}) run at --severities.",
        )
        parser.add_argument(
            "--severities",
            help="Comma-separated severities (percent) of a noise kind: one run per level "
            f"(default: {','.join(map(str, SEVERITIES))}).",
        )
        parser.add_argument("--seed", type=int, help="Run seed (default 1337, or every seed of --preset).")
        parser.add_argument("--backend", default="default", help="Alias in TRANSFORM_BACKENDS (default: default).")
        parser.add_argument("--limit", type=int, help="Only the first N items.")
        parser.add_argument(
            "--languages",
            help="Comma-separated target/pivot languages, ISO 639-1/639-3 or BCP-47 (default: es,fr,de,tr,ar).",
        )
        parser.add_argument(
            "--preset",
            choices=list(PRESETS),
            help="A paper's protocol: fills the settings left unset (without --seed: one run per preset seed); "
            "a conflicting setting is an error.",
        )
        parser.add_argument(
            "--no-language-check",
            dest="language_check",
            action="store_false",
            help="Allow languages the language identifier cannot check; the language check is skipped for the run.",
        )
        parser.add_argument("--temperature", type=float, help=f"default {GenerationParams.temperature}")
        parser.add_argument("--top-p", type=float, help=f"default {GenerationParams.top_p}")
        parser.add_argument("--max-tokens", type=int, help=f"default {GenerationParams.max_tokens}")
        parser.add_argument("--max-attempts", type=int, help=f"default {GenerationParams.max_attempts}")
        parser.add_argument("--wait", action="store_true", help="Show progress until the run ends.")
        parser.add_argument("--export", metavar="PATH", help="Export a run's transformed dataset (with --run).")
        parser.add_argument(
            "--run",
            type=int,
            help="An existing run: alone, print its status (progress, the backend it waits for, its error); "
            "or with --export, --wait or --resume.",
        )
        parser.add_argument("--resume", action="store_true", help="Queue the texts of --run that have no outcome.")
        self.add_actor_argument(parser)
        parser.add_argument(
            "--project",
            metavar="SLUG",
            help="Project of a new run (default: the dataset's, else the user's own one, else the default project).",
        )

    def handle(self, *args, **o):
        if o["resume"] and not o["run"]:
            raise CommandError("--resume needs --run RUN_ID")
        self.user = user_by_name(o["actor"]) if o["actor"] else None
        if o["run"]:
            runs = [self._get_run(o["run"])]
            if o["resume"]:
                runs = [transform_run_resume(actor=self.user, request=TransformRunResumeRequest(run=runs[0].pk))]
                self.stdout.write(f"Run {runs[0].pk} resumed: {runs[0].total - runs[0].done} texts to go")
        else:
            runs = self._create(o)
        if o["run"] and not (o["resume"] or o["wait"] or o["export"]):
            for line in job_status_lines(runs[0]):
                self.stdout.write(line)
            return
        if o["export"] and len(runs) > 1:
            raise CommandError("--export writes one run: pass --seed, or export each run with --run RUN_ID")
        if o["wait"] or o["export"]:
            runs = [self._wait(run) for run in runs]
        if o["export"]:
            result = transform_run_export(run=runs[0], path=o["export"])
            self.stdout.write(f"Exported {result.n_items} items to {result.path} ({result.n_skipped} left out: failed)")

    def _create(self, o) -> list[TransformRun]:
        if not o["dataset"] or not o["transformation"]:
            raise CommandError("--dataset and --transformation are required to start a run")
        runs = transform_runs_start(
            actor=self.user,
            request=TransformRunsStartRequest(
                project=o["project"],
                dataset=o["dataset"],
                transformation=o["transformation"],
                backend=o["backend"],
                limit=o["limit"],
                language_check=o["language_check"],
                preset=o["preset"] or "",
                seed=o["seed"],
                temperature=o["temperature"],
                top_p=o["top_p"],
                max_tokens=o["max_tokens"],
                max_attempts=o["max_attempts"],
                languages=[c.strip() for c in o["languages"].split(",")] if o["languages"] else None,
                severities=_severities(o["severities"]),
            ),
        )
        for run in runs:
            self.stdout.write(
                f"Run {run.pk}: {run.transformation} on {run.dataset.name}, {run.total} texts, seed {run.seed}"
                + (f", target {run.run_language}" if run.run_language else "")
                + (f", preset {run.preset}" if run.preset else "")
                + ("" if run.language_check else ", language check skipped")
            )
        return runs

    def _get_run(self, run_id: int) -> TransformRun:
        try:
            return scoped(TransformRun.objects, self.user).get(pk=run_id)
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
        if summary.language_check == "skipped":
            unchecked = ", ".join(summary.unchecked_languages) or "none"
            self.stdout.write(f"Language check skipped (--no-language-check); languages it cannot check: {unchecked}")
        if run.status == TransformRun.Status.FAILED:
            raise CommandError(run.error or "the run failed")
        return run


def _severities(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--severities takes whole percentages such as 2,5,10,20, got {text!r}") from None
