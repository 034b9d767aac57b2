import json
from pathlib import Path

from django.core.management.base import CommandError, CommandParser

from annotation.configs.config_export import Format, format_of
from annotation.export_services import benchmark_config_file_read
from core.commands import ShiftlabCommand
from core.progress import follow_job, job_status_lines, progress_bar
from core.projects import User, project_require_write, scoped, user_by_name
from evaluation.benchmark_execution import BenchmarkRunResumeRequest, benchmark_run_resume
from evaluation.benchmark_plan import SIDES
from evaluation.benchmark_services import BenchmarkRunStartRequest, benchmark_run_start
from evaluation.models import BenchmarkRun
from evaluation.report_robustness import robustness_report_write, run_preset
from evaluation.reports import benchmark_report
from evaluation.robustness_options import OPTION_CHOICES, ReportOptions
from transforms.presets import PRESETS
from transforms.selectors import DOCUMENT_SCOPES


class Command(ShiftlabCommand):
    help = (
        "Benchmark runs: models x datasets x (original + approved transformations) x seeds, one Celery task "
        "per unit. `run --config FILE` (a validated config, verified first) or `run --dataset NAME` (original "
        "data only); `status RUN`; `resume RUN` (re-queues units without a result); `results RUN [--json]`; "
        "`report RUN [--out DIR] [--tau-unit ...]` (robustness report: CSV, JSON, LaTeX tables and figures; "
        "the statistics' units as options); `export RUN --format mteb|hf --out DIR [--push REPO]`. "
        "`--as USER` acts as that user: only runs of their projects are found, and resume, report and export "
        "need an owner's or member's role; without it the command acts as the system (every run)."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        _add_run_arguments(sub.add_parser("run", help="Start a benchmark run."))
        for name in ("status", "resume", "results"):
            action = sub.add_parser(name)
            action.add_argument("run", type=int)
            if name == "resume":
                action.add_argument("--wait", action="store_true")
            if name == "results":
                action.add_argument("--json", dest="as_json", action="store_true", help="Units and aggregates as JSON.")
            self.add_actor_argument(action)
        _add_report_arguments(sub.add_parser("report", help="Write the robustness report's files."))
        _add_export_arguments(
            sub.add_parser("export", help="Write the run as an mteb results folder or a Hugging Face dataset.")
        )

    def handle(self, *args, action, actor=None, **options):
        getattr(self, f"do_{action}")(user=user_by_name(actor) if actor else None, **options)

    def do_run(
        self,
        *,
        user: User,
        config,
        dataset,
        models,
        transformation,
        seeds,
        limit,
        split,
        name,
        wait,
        project=None,
        preset=None,
        run_anyway=False,
        sides=None,
        document_scope=None,
        **_,
    ):
        text, fmt = _config_file(Path(config)) if config else (None, "yaml")
        run = benchmark_run_start(
            actor=user,
            request=BenchmarkRunStartRequest(
                project=project,
                models=models,
                config_text=text,
                config_format=fmt,
                datasets=dataset,
                transformations=transformation,
                seeds=seeds,
                preset=preset or "",
                run_anyway=run_anyway,
                limit=limit,
                sides=sides,
                document_scope=document_scope,
                split=split,
                name=name,
            ),
        )
        plan = run.plan
        self.stdout.write(
            f"Benchmark run {run.pk} in project {run.project.slug}: {run.total} units ({len(run.model_names)} models, "
            f"{len(plan['datasets'])} datasets, {len(plan['transformations'])} transformations)"
        )
        if run.source == run.Source.CONFIG:
            self.stdout.write(f"Config: {run.config_label}")
        if run.evidence_override:
            self.stdout.write("ran anyway although: " + "; ".join(run.evidence_override["reasons"]))
        if wait:
            self._wait(run)

    def do_status(self, *, user: User, run, **_):
        for line in job_status_lines(self._get(run, user), describe=_bar):
            self.stdout.write(line)

    def do_resume(self, *, user: User, run, wait=False, **_):
        found = benchmark_run_resume(actor=user, request=BenchmarkRunResumeRequest(run=self._get(run, user).pk))
        self.stdout.write(f"Benchmark run {found.pk} resumed: {found.total - found.done} units to go")
        if wait:
            self._wait(found)

    def do_results(self, *, user: User, run, as_json: bool = False, **_):
        report = benchmark_report(run=self._get(run, user))
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        else:
            self.stdout.write(report.as_text())

    def do_report(self, *, user: User, run, out=None, preset=None, **options):
        given = {name: options.get(name) for name in (*OPTION_CHOICES, "split_half_splits")}
        # preset (issue 15): the one given (checked first), else the run's; unset options are the
        # paper's protocol (issue 29)
        chosen = ReportOptions.for_preset(preset, given) if preset else None
        found = self._get(run, user, write=True)
        chosen = chosen or ReportOptions.for_preset(run_preset(found), given)
        for path in robustness_report_write(run=found, out=out, options=chosen):
            self.stdout.write(str(path))

    def do_export(self, *, user: User, run, export_format, out, push=None, **_):
        # mteb and pyarrow load only for this action: the other actions stay quick to start.
        from evaluation.export_services import benchmark_export_hf, benchmark_export_hf_push, benchmark_export_mteb

        found = self._get(run, user, write=True)
        if export_format == "mteb":
            if push:
                raise CommandError(
                    "--push goes with --format hf (mteb results are shared through the mteb results repository)."
                )
            written = benchmark_export_mteb(run=found, out=out)
            self.stdout.write(f"Wrote {len(written)} files under {out}: mteb.ResultCache({str(out)!r}).load_results()")
            return
        written = benchmark_export_hf(run=found, out=out)
        self.stdout.write(f"Wrote {len(written)} files under {out}: datasets.load_dataset({str(out)!r})")
        if push:
            self.stdout.write(
                f"Pushed to https://huggingface.co/datasets/{benchmark_export_hf_push(out=out, repo=push)}"
            )

    def _get(self, run_id: int, user: User, *, write: bool = False) -> BenchmarkRun:
        """The run, when ``user`` may read it (as missing otherwise); ``write``: and change it."""
        run = scoped(BenchmarkRun.objects.select_related("project"), user).filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no benchmark run {run_id}")
        if write:
            project_require_write(user, run.project)
        return run

    def _wait(self, run: BenchmarkRun) -> None:
        run = follow_job(run, self.stdout.write, describe=_bar)
        if run.status == BenchmarkRun.Status.FAILED:
            raise CommandError(run.error or "the benchmark run failed")
        self.stdout.write(benchmark_report(run=run).as_text())


def _config_file(path: Path) -> tuple[str, Format]:
    """The text of the config file ``path`` and its format, told by its name."""
    text = benchmark_config_file_read(path=path)
    try:
        return text, format_of(path.name)
    except ValueError as exc:  # annotation.configs.config_export.format_of: a name without a config suffix
        raise CommandError(str(exc)) from None


def _add_run_arguments(run: CommandParser) -> None:
    run.add_argument(
        "--config",
        help="Validated benchmark config (*.yaml/*.yml/*.json), exactly as exported by this deployment or "
        "signed with its SHIFTLAB_CONFIG_SIGNING_KEY.",
    )
    run.add_argument(
        "--dataset",
        action="append",
        default=[],
        help="A dataset (repeat). Without --config: original data only. With --config: "
        "benchmark these datasets instead of the config's.",
    )
    run.add_argument(
        "--models",
        nargs="+",
        default=["default"],
        help="Encoder aliases (EVALUATION_ENCODERS) or model names (default: default).",
    )
    run.add_argument("--transformation", action="append", default=[], help="Only these approved transformations.")
    run.add_argument("--seeds", type=int, nargs="+", help="Transformation seeds (default: the config's).")
    run.add_argument("--limit", type=int, help="Only the first N examples of each dataset.")
    run.add_argument("--split", default="test", help="Evaluated split (default: test).")
    run.add_argument("--name", default="")
    run.add_argument(
        "--project",
        help="The project the run belongs to (default: its datasets' and config's project, else --as's own "
        "project, else the default project); its datasets (unless shared) and config must be of it.",
    )
    run.add_argument("--wait", action="store_true", help="Show progress until the run ends.")
    run.add_argument(
        "--run-anyway",
        action="store_true",
        help="Run the config although the evidence behind it changed since it was exported (a later gate, "
        "a withdrawn approval, a revised study, changed ratings); the run records what changed.",
    )
    # --- presets (issue 15): a paper's protocol fills --seeds (with --config) and the encoders' dtype ---
    run.add_argument(
        "--preset", choices=list(PRESETS), help="A paper's protocol: its seeds unless --seeds, its encoders' dtype."
    )
    # --- sides (issue 30): what a config's transformations perturb on retrieval datasets ---
    run.add_argument(
        "--sides",
        nargs="+",
        choices=list(SIDES),
        help="Retrieval and reranking datasets: perturb the queries (default, unless the config fixes its sides: "
        "then those, and --sides picks among them), the corpus documents (reranking: the candidates), or both; "
        "several give one unit per side.",
    )
    run.add_argument(
        "--document-scope",
        choices=list(DOCUMENT_SCOPES),
        help="Documents the document side rewrites: those the evaluated queries judge relevant (default, unless "
        "the config fixes the scope), or the whole corpus (one rewrite per document). Reranking datasets rewrite "
        "every distinct candidate of the evaluated queries' lists.",
    )
    ShiftlabCommand.add_actor_argument(run)


def _add_report_arguments(report: CommandParser) -> None:
    report.add_argument("run", type=int)
    report.add_argument("--out", type=Path, help="Output folder (default: DATA_DIR/reports/RUN/).")
    # The statistics' units (evaluation.robustness_options.ReportOptions); unset options keep the run's
    # preset's value, or the default (the multi-axis paper's protocol).
    for name, choices in OPTION_CHOICES.items():
        report.add_argument(f"--{name.replace('_', '-')}", dest=name, choices=choices, help=f"Default: {choices[0]}.")
    report.add_argument(
        "--split-half-splits",
        dest="split_half_splits",
        type=int,
        help=f"Random splits (default: {ReportOptions().split_half_splits}).",
    )
    # --- presets (issue 15): a paper's statistics units fill the options left unset ---
    report.add_argument(
        "--preset", choices=list(PRESETS), help="A paper's protocol: its statistics' units (default: the run's)."
    )
    ShiftlabCommand.add_actor_argument(report)


def _add_export_arguments(export: CommandParser) -> None:
    export.add_argument("run", type=int)
    export.add_argument(
        "--format",
        dest="export_format",
        required=True,
        choices=["mteb", "hf"],
        help="mteb: TaskResult files that mteb.ResultCache(DIR).load_results() reads; hf: Parquet + dataset card.",
    )
    export.add_argument("--out", type=Path, required=True, help="Output folder.")
    export.add_argument("--push", metavar="REPO", help="With --format hf: upload the folder to this hub dataset repo.")
    ShiftlabCommand.add_actor_argument(export)


def _bar(run: BenchmarkRun) -> str:
    failed = f", {run.n_failed} failed" if run.n_failed else ""
    return progress_bar(run.done, run.total, suffix=f"units {run.status}{failed}")
