import json
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from core.errors import ShiftlabError
from core.progress import progress_bar
from corpora.models import Dataset
from transforms.judge_services import judge_report_create_evaluation, judge_report_create_run, judge_report_execute
from transforms.judge_tables import report_tables, report_warnings, tables_csv, tables_text
from transforms.judgement_services import JudgeParams
from transforms.models import JudgeReport, TransformRun
from transforms.registry import TRANSFORMATIONS
from transforms.selection_services import judge_report_create_selection
from transforms.services import GenerationParams


class Command(BaseCommand):
    help = (
        "The LLM judge. `evaluate`: agreement with gold STS scores; `run`: quality and fluency of a "
        "transformation run; `select`: compare candidate generators (crossover matrix, CIs, Holm groups); "
        "`show`: print or export a stored report. Reports run in this process with a progress bar and are "
        "stored, so the web page shows the same numbers; judgements are cached, so re-running is cheap."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)

        def judged(p, judges_help):
            p.add_argument("--judge", dest="judges", action="append", help=judges_help)
            p.add_argument("--seed", type=int, default=0)
            p.add_argument("--temperature", type=float, default=JudgeParams.temperature)
            p.add_argument("--max-attempts", type=int, default=JudgeParams.max_attempts)
            p.add_argument("--json", action="store_true", help="Print the stored result as JSON.")

        evaluate = sub.add_parser("evaluate", help="Spearman overall and per length bin, MAE per gold bucket.")
        evaluate.add_argument("--dataset", required=True, help="An sts or str dataset.")
        evaluate.add_argument("--limit", type=int, help="Only the first N pairs.")
        evaluate.add_argument("--split", help="Only this split.")
        evaluate.add_argument("--backend", help="Judge backend alias (same as --judge).")
        judged(evaluate, "Backend alias of the judge in TRANSFORM_BACKENDS (default: default).")

        run = sub.add_parser("run", help="Quality and fluency of every successful text of a run.")
        run.add_argument("--run", type=int, required=True, help="A succeeded transformation run.")
        run.add_argument("--resamples", type=int, default=1000, help="Bootstrap resamples for the HL interval.")
        judged(run, "Judge backend alias; repeat for several judges (default: default).")

        select = sub.add_parser("select", help="Compare candidate generator models on the same texts.")
        select.add_argument("--dataset", help="Dataset the candidates transform.")
        select.add_argument("--transformation", default="paraphrase", choices=list(TRANSFORMATIONS))
        select.add_argument(
            "--candidate",
            dest="candidates",
            action="append",
            default=[],
            help="Generator backend alias; repeat for each candidate.",
        )
        select.add_argument(
            "--run",
            dest="runs",
            type=int,
            action="append",
            default=[],
            help="An existing run as a candidate; repeatable.",
        )
        select.add_argument("--limit", type=int, help="Only the first N items of the dataset.")
        select.add_argument("--resamples", type=int, default=1000)
        select.add_argument("--alpha", type=float, default=0.05)
        judged(select, "Judge backend alias; repeatable (default: every candidate judges every candidate).")

        show = sub.add_parser("show", help="Print a stored report, or export it.")
        show.add_argument("report", type=int)
        show.add_argument("--json", action="store_true")
        show.add_argument("--csv", metavar="PATH", help="Write the report's tables as CSV (long form).")

    def handle(self, *args, **o):
        if o["action"] == "show":
            return self._show(o)
        try:
            report = getattr(self, f"_create_{o['action']}")(o)
        except (ShiftlabError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Judge report {report.pk} ({report.get_kind_display()})")
        self._last_tenth = None  # progress lines written to a log: one per tenth
        try:
            report = judge_report_execute(report_id=report.pk, on_progress=self._progress)
        except ShiftlabError as exc:
            raise CommandError(str(exc)) from None  # judgements made so far are cached: rerunning resumes
        if sys.stdout.isatty():
            self.stdout.write("")
        if report.status != JudgeReport.Status.SUCCEEDED:
            raise CommandError(report.error or "the report failed")
        self._print(report, as_json=o["json"])

    def _params(self, o) -> JudgeParams:
        return JudgeParams(temperature=o["temperature"], max_attempts=o["max_attempts"])

    def _create_evaluate(self, o) -> JudgeReport:
        judge = o["backend"] or (o["judges"] or ["default"])[0]
        return judge_report_create_evaluation(
            dataset=_dataset(o["dataset"]),
            judge=judge,
            limit=o["limit"],
            split=o["split"],
            seed=o["seed"],
            params=self._params(o),
            dispatch=False,
        )

    def _create_run(self, o) -> JudgeReport:
        try:
            run = TransformRun.objects.get(pk=o["run"])
        except TransformRun.DoesNotExist:
            raise CommandError(f"No run {o['run']}. See the runs page or GET /api/transform-runs/") from None
        return judge_report_create_run(
            run=run,
            judges=o["judges"] or ["default"],
            seed=o["seed"],
            params=self._params(o),
            n_resamples=o["resamples"],
            dispatch=False,
        )

    def _create_select(self, o) -> JudgeReport:
        runs = list(TransformRun.objects.filter(pk__in=o["runs"]).select_related("generator", "dataset"))
        missing = set(o["runs"]) - {r.pk for r in runs}
        if missing:
            raise CommandError(f"No run(s) {sorted(missing)}")
        return judge_report_create_selection(
            dataset=_dataset(o["dataset"]) if o["dataset"] else None,
            transformation=o["transformation"],
            candidates=o["candidates"],
            runs=runs,
            judges=o["judges"],
            limit=o["limit"],
            seed=o["seed"],
            generation_params=GenerationParams(),
            params=self._params(o),
            n_resamples=o["resamples"],
            alpha=o["alpha"],
            dispatch=False,
        )

    def _progress(self, done: int, total: int) -> None:
        line = progress_bar(done, total)
        if sys.stdout.isatty():
            self.stdout.write("\r" + line, ending="")
        elif done * 10 // max(total, 1) != self._last_tenth:
            self._last_tenth = done * 10 // max(total, 1)
            self.stdout.write(line)  # every 10% in logs

    def _show(self, o) -> None:
        try:
            report = JudgeReport.objects.get(pk=o["report"])
        except JudgeReport.DoesNotExist:
            raise CommandError(f"No judge report {o['report']}") from None
        if report.result is None:
            raise CommandError(f"Report {report.pk} is {report.status} ({report.done}/{report.total}): no result yet")
        if o["csv"]:
            Path(o["csv"]).write_text(tables_csv(report_tables(report.kind, report.result)), encoding="utf-8")
            self.stdout.write(f"Wrote {o['csv']}")
            return
        self._print(report, as_json=o["json"])

    def _print(self, report: JudgeReport, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(report.result, indent=2))
        else:
            for warning in report_warnings(report.kind, report.result):
                self.stdout.write(self.style.WARNING(f"Warning: {warning}"))
            self.stdout.write(tables_text(report_tables(report.kind, report.result)))


def _dataset(name: str) -> Dataset:
    try:
        return Dataset.objects.get(name=name)
    except Dataset.DoesNotExist:
        raise CommandError(f"No dataset named {name!r}. See: python manage.py corpora list") from None
