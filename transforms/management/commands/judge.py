import json
import sys
from dataclasses import asdict
from pathlib import Path

from django.core.management.base import CommandError

from core.commands import ShiftlabCommand
from core.progress import job_status_lines, progress_bar
from core.projects import User, scoped, user_by_name
from transforms.judge_services import (
    JudgeReportCreateRequest,
    judge_report_create,
    judge_report_execute_here,
)
from transforms.judge_tables import report_tables, report_warnings, tables_csv, tables_text
from transforms.judgement_services import JudgeParams
from transforms.models import JudgeReport
from transforms.presets import PRESETS
from transforms.registry import TRANSFORMATIONS
from transforms.sensitivity_services import prompt_sensitivity_report
from transforms.sensitivity_tables import sensitivity_tables


class Command(ShiftlabCommand):
    help = (
        "The LLM judge. `evaluate`: agreement with gold STS scores; `run`: quality and fluency of a "
        "transformation run; `select`: compare candidate generators (crossover matrix, CIs, Holm groups); "
        "`sensitivity`: compare a transformation's prompt versions; `show`: print or export a stored report; "
        "`status`: a report's progress, and the backend it waits for while its task retries. "
        "Reports run in this process with a progress bar and are "
        "stored, so the web page shows the same numbers; judgements are cached, so re-running is cheap. "
        "Without --as it acts as the system: it sees every project's datasets, runs and reports."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        _add_evaluate(sub)
        _add_run(sub)
        _add_select(sub)
        _add_sensitivity(sub)
        status = sub.add_parser(
            "status", help="A report's progress, the backend it waits for (while its task retries), its error."
        )
        status.add_argument("report", type=int)
        ShiftlabCommand.add_actor_argument(status)
        show = sub.add_parser("show", help="Print a stored report, or export it.")
        show.add_argument("report", type=int)
        show.add_argument("--json", action="store_true")
        show.add_argument("--csv", metavar="PATH", help="Write the report's tables as CSV (long form).")
        ShiftlabCommand.add_actor_argument(show)

    def handle(self, *args, **o):
        self.user: User = user_by_name(o["actor"]) if o["actor"] else None
        if o["action"] == "show":
            return self._show(o)
        if o["action"] == "status":
            for line in job_status_lines(self._get_report(o["report"])):
                self.stdout.write(line)
            return
        if o["action"] == "sensitivity":
            return self._sensitivity(o)
        asked = JudgeReportCreateRequest(project=o["project"], **_REPORT_INPUTS[o["action"]](o), **_settings(o))
        report = judge_report_create(actor=self.user, request=asked, dispatch=False)
        self.stdout.write(f"Judge report {report.pk} ({report.get_kind_display()})")
        self._last_tenth = None  # progress lines written to a log: one per tenth
        report = judge_report_execute_here(report_id=report.pk, on_progress=self._progress)
        if sys.stdout.isatty():
            self.stdout.write("")
        if report.status != JudgeReport.Status.SUCCEEDED:
            raise CommandError(report.error or "the report failed")
        self._print(report, as_json=o["json"])

    def _progress(self, done: int, total: int) -> None:
        line = progress_bar(done, total)
        if sys.stdout.isatty():
            self.stdout.write("\r" + line, ending="")
        elif done * 10 // max(total, 1) != self._last_tenth:
            self._last_tenth = done * 10 // max(total, 1)
            self.stdout.write(line)  # every 10% in logs

    def _get_report(self, report_id: int) -> JudgeReport:
        try:
            return scoped(JudgeReport.objects, self.user).get(pk=report_id)
        except JudgeReport.DoesNotExist:
            raise CommandError(f"No judge report {report_id}") from None

    def _show(self, o) -> None:
        report = self._get_report(o["report"])
        if report.result is None:
            raise CommandError(f"Report {report.pk} is {report.status} ({report.done}/{report.total}): no result yet")
        if o["csv"]:
            Path(o["csv"]).write_text(tables_csv(report_tables(report.kind, report.result)), encoding="utf-8")
            self.stdout.write(f"Wrote {o['csv']}")
            return
        self._print(report, as_json=o["json"])

    def _sensitivity(self, o) -> None:
        result = asdict(
            prompt_sensitivity_report(run_ids=o["runs"], seed=o["seed"], n_resamples=o["resamples"], user=self.user)
        )
        if o["json"]:
            self.stdout.write(json.dumps(result, indent=2))
            return
        tables = sensitivity_tables(result)
        if o["csv"]:
            Path(o["csv"]).write_text(tables_csv(tables), encoding="utf-8")
            self.stdout.write(f"Wrote {o['csv']}")
            return
        self.stdout.write(tables_text(tables))

    def _print(self, report: JudgeReport, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(report.result, indent=2))
        else:
            for warning in report_warnings(report.kind, report.result):
                self.stdout.write(self.style.WARNING(f"Warning: {warning}"))
            self.stdout.write(tables_text(report_tables(report.kind, report.result)))


def _settings(o) -> dict:
    """The raw settings every kind of report takes (a preset fills the unset ones)."""
    return {
        "preset": o["preset"] or "",
        "seed": o["seed"],
        "temperature": o["temperature"],
        "max_attempts": o["max_attempts"],
    }


# Per subcommand: its inputs as :func:`transforms.judge_services.judge_report_create` takes them.
_REPORT_INPUTS = {
    "evaluate": lambda o: {
        "kind": JudgeReport.Kind.EVALUATION,
        "dataset": o["dataset"],
        "limit": o["limit"],
        "split": o["split"],
        "judges": [o["backend"]] if o["backend"] else o["judges"],
    },
    "run": lambda o: {
        "kind": JudgeReport.Kind.RUN,
        "run": o["run"],
        "judges": o["judges"],
        "resamples": o["resamples"],
    },
    "select": lambda o: {
        "kind": JudgeReport.Kind.SELECTION,
        "dataset": o["dataset"],
        "transformation": (o["transformations"] or ["paraphrase"])[0],
        "transformations": o["transformations"] or (),
        "criteria": o["criteria"],
        "top_k": o["top_k"],
        "candidates": o["candidates"],
        "runs": o["runs"],
        "judges": o["judges"],
        "limit": o["limit"],
        "resamples": o["resamples"],
        "alpha": o["alpha"],
    },
}


def _add_judged(p, judges_help: str) -> None:
    """The options of the subcommands that make a report."""
    p.add_argument("--judge", dest="judges", action="append", help=judges_help)
    p.add_argument("--seed", type=int, help="default 0, or the first seed of --preset")
    p.add_argument("--temperature", type=float, help=f"default {JudgeParams.temperature}, or the preset's")
    p.add_argument("--max-attempts", type=int, default=JudgeParams.max_attempts)
    p.add_argument(
        "--preset",
        choices=list(PRESETS),
        help="A paper's protocol: fills the settings left unset; a conflicting setting is an error.",
    )
    p.add_argument("--json", action="store_true", help="Print the stored result as JSON.")
    p.add_argument(
        "--project",
        metavar="SLUG",
        help="Project of the report (default: its inputs', else the user's own one, else the default).",
    )
    ShiftlabCommand.add_actor_argument(p)


def _add_evaluate(sub) -> None:
    evaluate = sub.add_parser("evaluate", help="Spearman overall and per length bin, MAE per gold bucket.")
    evaluate.add_argument("--dataset", required=True, help="An sts or str dataset.")
    evaluate.add_argument("--limit", type=int, help="Only the first N pairs.")
    evaluate.add_argument("--split", help="Only this split.")
    evaluate.add_argument("--backend", help="Judge backend alias (same as --judge).")
    _add_judged(evaluate, "Backend alias of the judge in TRANSFORM_BACKENDS (default: default).")


def _add_run(sub) -> None:
    run = sub.add_parser("run", help="Quality and fluency of every successful text of a run.")
    run.add_argument("--run", type=int, required=True, help="A succeeded transformation run.")
    run.add_argument("--resamples", type=int, default=1000, help="Bootstrap resamples for the HL interval.")
    _add_judged(run, "Judge backend alias; repeat for several judges (default: default).")


def _add_select(sub) -> None:
    select = sub.add_parser("select", help="Compare candidate generator models on the same texts.")
    select.add_argument("--dataset", help="Dataset the candidates transform.")
    select.add_argument(
        "--transformation",
        dest="transformations",
        action="append",
        choices=list(TRANSFORMATIONS),
        help="Default paraphrase; repeat to compare the candidates on several transformations and pool them.",
    )
    select.add_argument(
        "--criterion",
        dest="criteria",
        action="append",
        choices=["quality", "fluency", "similarity"],
        help="A judged dimension; repeatable (default quality and fluency; similarity: paraphrase-like only).",
    )
    select.add_argument("--top-k", type=int, default=3, help="k of the pooled top-k crossover (default 3).")
    select.add_argument(
        "--candidate", dest="candidates", action="append", default=[], help="Generator backend alias; repeat for each."
    )
    select.add_argument(
        "--run", dest="runs", type=int, action="append", default=[], help="An existing run as a candidate; repeatable."
    )
    select.add_argument("--limit", type=int, help="Only the first N items of the dataset.")
    select.add_argument("--resamples", type=int, default=1000)
    select.add_argument("--alpha", type=float, default=0.05)
    _add_judged(select, "Judge backend alias; repeatable (default: every candidate judges every candidate).")


def _add_sensitivity(sub) -> None:
    sensitivity = sub.add_parser(
        "sensitivity",
        help="Compare runs of one transformation under different prompt versions (error rates, edit distances, "
        "judge scores of their judge reports, benchmark Δ), with intervals and tests.",
    )
    sensitivity.add_argument(
        "--run", dest="runs", type=int, action="append", required=True, help="A run; repeat for each version."
    )
    sensitivity.add_argument("--seed", type=int, default=0, help="Seed of the bootstrap and permutations.")
    sensitivity.add_argument("--resamples", type=int, default=1000)
    sensitivity.add_argument("--json", action="store_true", help="Print the report as JSON.")
    sensitivity.add_argument("--csv", metavar="PATH", help="Write the report's tables as CSV (long form).")
    ShiftlabCommand.add_actor_argument(sensitivity)
