import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from annotation.baselines.baseline_llm_services import baseline_llm_annotate
from annotation.baselines.baseline_services import (
    BaselineCreateRequest,
    baseline_close,
    baseline_create,
    baseline_publish,
)
from annotation.baselines.baseline_sync_services import baseline_sync
from annotation.management.reporting import publish_report
from annotation.models import BASELINE_TASK_TYPES, BaselineStudy
from annotation.selectors import baseline_get, baseline_rater_counts
from core.commands import ShiftlabCommand
from core.errors import NotFoundError
from core.nesting import loads_json
from core.progress import progress_bar
from core.projects import scoped, user_by_name

CREATE_INPUTS = ("project", "name", "dataset", "task_type", "n_instances", "split", "seed")  # of baseline_create


def _study(ref: str, actor=None) -> BaselineStudy:
    """The baseline study named or numbered ``ref`` among those ``actor`` may read (``None``: the
    system, all); the services refuse a change by a read-only caller."""
    try:
        return baseline_get(ref, studies=scoped(BaselineStudy.objects.select_related("project"), actor))
    except BaselineStudy.DoesNotExist:
        raise NotFoundError(f"no baseline study {ref!r}: give its name or id (see `baseline status`)") from None


def _users(usernames: list[str]):
    found = {u.get_username(): u for u in get_user_model().objects.filter(username__in=usernames)}
    if missing := [name for name in usernames if name not in found]:
        raise CommandError(f"no user(s) {', '.join(missing)}: create them in the annotator group first")
    return [found[name] for name in usernames]


class Command(ShiftlabCommand):
    help = (
        "Human performance baselines: create (seeded sample of task instances) → publish (Argilla) → "
        "sync (answers back) → close (answers final); llm-annotate lets an LLM answer the same instances; "
        "status counts answers."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Draw the instances of a new baseline study.")
        create.add_argument("name")
        create.add_argument("--dataset", required=True, help="Name of an imported dataset.")
        create.add_argument("--task", dest="task_type", required=True, choices=[t.value for t in BASELINE_TASK_TYPES])
        create.add_argument(
            "-n",
            "--instances",
            dest="n_instances",
            type=int,
            required=True,
            help="Pairs (sts), items (classification, clustering) or queries (reranking).",
        )
        create.add_argument("--split", default="test")
        create.add_argument("--seed", type=int, default=0)
        create.add_argument(
            "--options",
            default="{}",
            help="Task options as JSON, e.g. '{\"batch_size\": 10}', '{\"candidates\": 8}', "
            "'{\"stratify\": true}', '{\"raters_per_instance\": 3}'.",
        )
        create.add_argument(
            "--instructions",
            default="",
            help="Text for annotators, or @FILE to read it; default: the project's wording.",
        )
        create.add_argument(
            "--project",
            help="Slug of the project it goes into (the dataset must be in it or shared; its Argilla workspace "
            "is named after it). Default: the dataset's project, else the --as user's one project, else the "
            "default project.",
        )
        publish = sub.add_parser("publish", help="Publish to Argilla and provision annotator accounts.")
        publish.add_argument("study")
        publish.add_argument("--annotators", nargs="*", default=[], help="Usernames in the annotator group.")
        sync = sub.add_parser("sync", help="Bring submitted answers from Argilla (idempotent).")
        sync.add_argument("study")
        llm = sub.add_parser("llm-annotate", help="An LLM answers every instance (resumable).")
        llm.add_argument("study")
        llm.add_argument("--backend", default="default", help="Alias in TRANSFORM_BACKENDS (default: default).")
        close = sub.add_parser("close", help="A last sync, then freeze the answers (no more syncs or LLM answers).")
        close.add_argument("study")
        status = sub.add_parser("status", help="Instances and answers per rater.")
        status.add_argument("study", nargs="?")
        for p in sub.choices.values():
            self.add_actor_argument(p)

    def handle(self, *args, action, actor=None, **options):
        actor = user_by_name(actor) if actor else None
        getattr(self, f"do_{action.replace('-', '_')}")(actor=actor, **options)

    def do_create(self, *, actor, options, instructions, **given):
        try:
            parsed = loads_json(options)
        except ValueError as exc:  # NestingError is one too
            raise CommandError(f"--options is not valid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise CommandError("--options must be a JSON object, e.g. '{\"batch_size\": 10}'")
        if instructions.startswith("@"):
            try:
                instructions = Path(instructions[1:]).read_text(encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"cannot read the instructions file: {exc}") from exc
        inputs = {name: given[name] for name in CREATE_INPUTS}
        asked = BaselineCreateRequest(options=parsed, instructions=instructions, **inputs)
        study = baseline_create(actor=actor, request=asked)
        self.stdout.write(
            f"Created {study} (id {study.pk}): {study.instances.count()} instances of {study.task_type} "
            f"from {study.dataset.name}/{study.split}, seed {study.seed}."
        )

    def do_publish(self, *, actor, study, annotators, **_):
        study = _study(study, actor)
        publish_report(self.stdout, baseline_publish(study=study, annotators=_users(annotators), actor=actor))

    def do_sync(self, *, actor, study, **_):
        r = baseline_sync(study=_study(study, actor), actor=actor)
        self.stdout.write(
            f"Synced: {r.created} new, {r.updated} changed, {r.withdrawn} withdrawn, {r.unchanged} "
            f"unchanged answers; ignored {r.ignored_users} answers of users outside the study"
            f"{f', {r.invalid} invalid values (stored answers kept)' if r.invalid else ''}"
            f"{f', {r.stale} older than the stored answer' if r.stale else ''}"
            f"{f', NUL characters removed from {r.nul_stripped}' if r.nul_stripped else ''}."
        )

    def do_llm_annotate(self, *, actor, study, backend, **_):
        study = _study(study, actor)
        interactive = sys.stdout.isatty()

        def show(done: int, total: int) -> None:
            line = progress_bar(done, total, suffix="instances")
            self.stdout.write("\r" + line if interactive else line, ending="" if interactive else "\n")

        try:
            r = baseline_llm_annotate(study=study, backend_alias=backend, actor=actor, on_progress=show)
        finally:
            if interactive:
                self.stdout.write("")
        self.stdout.write(
            f"{r.rater}: {r.valid} answers, {r.invalid} did not parse, {r.skipped} answered before "
            f"(of {r.total} instances)."
        )

    def do_close(self, *, actor, study, **_):
        closed = baseline_close(study=_study(study, actor), actor=actor)
        self.stdout.write(f"Closed {closed}: its answers are final.")

    def do_status(self, *, actor, study, **_):
        every = scoped(BaselineStudy.objects.select_related("dataset"), actor)
        studies = [_study(study, actor)] if study else list(every)
        if not studies:
            self.stdout.write("No baseline studies yet: create one with `baseline create`.")
        for s in studies:
            self.stdout.write(
                f"{s.name} [{s.status}] {s.task_type} on {s.dataset.name}/{s.split}: "
                f"{s.instances.count()} instances, seed {s.seed}, annotators "
                f"{', '.join(u.get_username() for u in s.annotators.all()) or '-'}"
            )
            for c in baseline_rater_counts(study=s):
                bad = f" ({c.invalid} did not parse)" if c.invalid else ""
                self.stdout.write(f"  {c.rater:<24} {c.source:<6} {c.answers:>5} answers{bad}")
