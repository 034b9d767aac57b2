import json

from django.core.management.base import CommandError, CommandParser

from annotation.models import BaselineStudy
from annotation.selectors import baseline_get
from core.commands import ShiftlabCommand
from core.progress import follow_job
from core.projects import scoped, user_by_name
from evaluation.baseline_services import (
    BaselineReport,
    baseline_report_build,
    baseline_score_job_scores,
    baseline_score_start,
)
from evaluation.models import BaselineScoreJob


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


class Command(ShiftlabCommand):
    help = (
        "Humans ranked among models on a baseline study: the pooled and per-rater human scores, each LLM "
        "annotator and the given models, scored with the same evaluators on the same instances, with 95% "
        "intervals and inter-annotator agreement. Prints a table, or the report as JSON with --json."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Baseline study name or id (see: manage.py baseline status).")
        parser.add_argument(
            "--models", default="", help="Comma-separated encoder aliases or model names, e.g. all-MiniLM-L6-v2."
        )
        parser.add_argument("--batch-size", type=int, help="Encoding batch size (default: the encoder's).")
        parser.add_argument("--json", action="store_true", help="Print the whole report as JSON.")
        self.add_actor_argument(parser)

    def handle(self, *args, **o):
        user = user_by_name(o["actor"]) if o["actor"] else None
        try:
            study = baseline_get(o["study"], studies=scoped(BaselineStudy.objects.all(), user))
        except BaselineStudy.DoesNotExist:
            raise CommandError(f"No baseline study {o['study']!r}: give its name or id.") from None
        models = [m.strip() for m in o["models"].split(",") if m.strip()]
        scores = []
        if models:  # the page's "Score models" job, followed here
            job = baseline_score_start(study=study, models=models, actor=user, batch_size=o["batch_size"])
            job = follow_job(job, self.stderr.write if o["json"] else self.stdout.write)
            if job.status == BaselineScoreJob.Status.FAILED:
                raise CommandError(job.error)
            scores = baseline_score_job_scores(job)
        report = baseline_report_build(study=study, model_scores=scores)
        if o["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=2))
            return
        self.stdout.write(self._table(report))

    def _table(self, report: BaselineReport) -> str:
        lines = [
            f"{report.study} ({report.task_type}, {report.dataset} [{report.split}]): {report.metric}; "
            f"unit: {report.unit}; {report.n_instances} instances",
            f"{'kind':<7} {'rater':<32} {'score':>7} {'interval':>17} {'units':>6} {'answers':>8} {'invalid':>8}"
            "  vs humans",
        ]
        for row in report.rows:
            interval = f"{_number(row.ci_low)}–{_number(row.ci_high)}" if row.ci_low is not None else "–"
            answers = "–" if row.n_answers is None else str(row.n_answers)
            invalid = "–" if row.n_invalid is None else str(row.n_invalid)
            flag = {"above": "above CI", "below": "below CI", "inside": "inside"}.get(row.against_humans or "", "")
            lines.append(
                f"{row.kind:<7} {row.name[:32]:<32} {_number(row.score):>7} {interval:>17} "
                f"{row.n_units:>6} {answers:>8} {invalid:>8}  {flag}"
            )
        lines.append(f"interval of the pooled humans: {report.interval}")
        for label, agreement in (("humans", report.agreement), ("LLMs", report.llm_agreement)):
            if agreement:
                text = ", ".join(f"{a.measure} {_number(a.value)}" for a in agreement)
                lines.append(f"agreement between {label}: {text}")
        return "\n".join(lines)
