import json
from dataclasses import asdict

from django.core.management.base import CommandError

from annotation.management.reporting import new_accounts_report, publish_report
from annotation.models import Flag, GateResult, Study, StudyJob
from annotation.science.gating import gate_state_of
from annotation.selectors import roster_annotators, study_progress
from annotation.studies.adaptive_services import study_adaptive_check, study_adaptive_rows
from annotation.studies.argilla_services import study_argilla_texts_resend, study_release_batches
from annotation.studies.control_pool import control_pool_read
from annotation.studies.control_services import study_control_detectability, study_detectability_notes
from annotation.studies.design_services import (
    StudyCreateRequest,
    StudyReviseRequest,
    study_create,
    study_lock,
    study_revise,
)
from annotation.studies.gate_services import approval_decide, gate_result_current, study_gate
from annotation.studies.judge_population_services import judge_jobs_summary, study_judge_population_start
from annotation.studies.publish_job_services import publish_job_result, study_publish_start
from annotation.studies.quality_services import study_annotator_quality
from annotation.studies.sync_services import study_sync, sync_summary
from annotation.studies.validation_job_services import study_validation_start
from annotation.studies.validation_services import annotator_reject, annotator_replace, flag_review
from core.commands import ShiftlabCommand
from core.nesting import loads_json
from core.progress import follow_job
from core.projects import project_require_write, scoped, user_by_name


def _study(ref: str, actor=None, *, change: bool = False) -> Study:
    """`name` (latest version), `name@version` or a numeric id, among the studies ``actor`` may
    read (``None``: the system, all); with ``change``, a read-only caller is refused."""
    name, _, version = ref.partition("@")
    readable = scoped(Study.objects.select_related("project"), actor)
    studies = readable.filter(pk=int(ref)) if ref.isdigit() else readable.filter(name=name)
    if version:
        studies = studies.filter(version=int(version))
    projects = sorted(set(studies.values_list("project__slug", flat=True)))
    if len(projects) > 1:  # names are unique per project
        raise CommandError(f"study {name!r} is in several projects you can read ({', '.join(projects)}): give its id")
    study = studies.order_by("-version").first()
    if study is None:
        raise CommandError(f"no study {ref!r}: give its id, its name, or name@version (see `study status`)")
    if change:
        project_require_write(actor, study.project)
    return study


FLAG_PROJECT = "rating__study_item__study__project"


class Command(ShiftlabCommand):
    help = (
        "Human-validation studies. create → lock → publish → sync → validate → (review) → gate → decide. "
        "`status` prints progress, control checks and live agreement. --as USER acts as that researcher "
        "(only their projects' studies; audited under their name); without it the command acts as the system."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Declare a draft study over succeeded runs.")
        create.add_argument("name")
        create.add_argument("--runs", type=int, nargs="+", required=True)
        create.add_argument(
            "--project",
            help="Slug of the project it goes into (its runs must be in it; its Argilla workspace is named "
            "after it). Default: the runs' project, else the --as user's one project, else the default project.",
        )
        create.add_argument("--design", default="{}", help="Design fields as JSON, e.g. '{\"raters_per_item\": 3}'.")
        revise = sub.add_parser("revise", help="New version of a study with changed design fields.")
        revise.add_argument("study")
        revise.add_argument("--design", default="{}")
        for name, text in (
            ("lock", "Freeze the design and draw items and controls."),
            ("sync", "Bring submitted responses from Argilla (idempotent)."),
            ("validate", "Control check, flags and rejections, as declared."),
            ("gate", "Evaluate and store the gate of every transformation."),
            ("status", "Progress, control checks, agreement and the current gate."),
            ("resend-texts", "Send the texts of published records to Argilla again, encoded as they are now."),
            ("judge", "Have the LLM judges score every output of the study's runs (prediction-powered gate)."),
        ):
            p = sub.add_parser(name, help=text)
            p.add_argument("study")
        publish = sub.add_parser("publish", help="Publish to Argilla and provision annotators.")
        publish.add_argument("study")
        publish.add_argument("--annotators", nargs="*", default=[], help="Usernames in the annotator group.")
        for name in ("lock", "publish"):
            sub.choices[name].add_argument(
                "--control-pool",
                metavar="FILE",
                help="Control pairs to use first when locking (JSONL or CSV: text_a, text_b, "
                "kind easy_positive/easy_negative, optional language_a, language_b).",
            )
        annotators = sub.add_parser(
            "annotators", help="Annotator quality: time, straight-lining, controls, competence."
        )
        annotators.add_argument("study")
        review = sub.add_parser("review", help="Confirm or dismiss a flag.")
        review.add_argument("flag", type=int)
        review.add_argument("decision", choices=[Flag.Status.CONFIRMED, Flag.Status.DISMISSED])
        review.add_argument("--note", default="")
        reject = sub.add_parser("reject-annotator", help="Reject an annotator by hand, with a reason.")
        reject.add_argument("study")
        reject.add_argument("username")
        reject.add_argument("--reason", required=True)
        replace = sub.add_parser(
            "replace-annotator", help="Replace an annotator who leaves: their unsubmitted items go to USER."
        )
        replace.add_argument("study")
        replace.add_argument("username")
        replace.add_argument("by", metavar="USER", help="The annotator who takes over.")
        replace.add_argument("--reason", required=True)
        decide = sub.add_parser("decide", help="Approve or reject a transformation on its current gate result.")
        decide.add_argument("study")
        decide.add_argument("transformation")
        decide.add_argument("decision", choices=["approve", "reject"])
        decide.add_argument("--comment", required=True)
        for p in sub.choices.values():
            self.add_actor_argument(p)

    def handle(self, *args, action, actor=None, **options):
        actor = user_by_name(actor) if actor else None
        getattr(self, f"do_{action.replace('-', '_')}")(actor=actor, **options)

    @staticmethod
    def _design_fields(text: str) -> dict:
        try:
            return loads_json(text)
        except ValueError as exc:  # NestingError is one too
            raise CommandError(f"--design is not valid JSON: {exc}") from exc

    def do_create(self, *, actor, name, runs, project, design, **_):
        asked = StudyCreateRequest(name=name, runs=runs, design=self._design_fields(design), project=project or None)
        study = study_create(actor=actor, request=asked)
        self.stdout.write(
            f"Created {study} (id {study.pk}) in project {study.project}, draft. Lock it when the design is final."
        )

    def do_revise(self, *, actor, study, design, **_):
        old = _study(study, actor, change=True)
        new = study_revise(actor=actor, request=StudyReviseRequest(study=old, design=self._design_fields(design)))
        self.stdout.write(f"Created {new} (id {new.pk}) from {old}.")

    def do_lock(self, *, actor, study, control_pool=None, **_):
        study = self._lock(_study(study, actor, change=True), control_pool, actor)
        self.stdout.write(f"Locked {study}: {json.dumps(study.sample_info)}")

    @staticmethod
    def _lock(study: Study, control_pool: str | None, actor) -> Study:
        """Lock ``study``, with the pool file's pairs when one is named."""
        pool = control_pool_read(control_pool) if control_pool is not None else None
        return study_lock(study=study, actor=actor, control_pool=pool)

    def do_publish(self, *, actor, study, annotators, control_pool=None, **_):
        study = _study(study, actor, change=True)
        users = roster_annotators(study.project, annotators)
        if control_pool is not None:
            study = self._lock(study, control_pool, actor)
        job = self._follow(study_publish_start(study=study, annotators=users, actor=actor))
        publish_report(self.stdout, publish_job_result(job))

    def do_resend_texts(self, *, actor, study, **_):
        study = _study(study, actor, change=True)
        sent = study_argilla_texts_resend(study=study, actor=actor)
        self.stdout.write(f"Sent the texts of {sent} records again.")

    def do_sync(self, *, actor, study, **_):
        study = _study(study, actor, change=True)
        result = study_sync(study=study)
        self.stdout.write(f"Synced: {sync_summary(asdict(result))}.")
        adaptive = study_adaptive_check(study=study)  # as the sync task does
        if adaptive.decisions:
            self.stdout.write(f"Adaptive stopping: {adaptive.summary()}.")
        if released := study_release_batches(study=study):
            self.stdout.write(f"Annotators' queues in Argilla now hold {released} records.")

    def do_judge(self, *, actor, study, **_):
        jobs = study_judge_population_start(study=_study(study, actor, change=True), actor=actor)
        self.stdout.write("The LLM judges score every output: " + judge_jobs_summary(jobs) + ".")

    def do_validate(self, *, actor, study, **_):
        job = self._follow(study_validation_start(study=_study(study, actor, change=True), actor=actor))
        result = job.result
        self.stdout.write(f"Control checks: {json.dumps(result['control_status'])}")
        self.stdout.write(
            f"Flags: {result['flags_created']} new, {result['flags_removed']} withdrawn; "
            f"rejected: {json.dumps(result['rejected'])}"
        )

    def _follow(self, job: StudyJob) -> StudyJob:
        """Wait for a validation or publish job (the page's and the API's), with its progress;
        a failed one stops the command with its error."""
        self.stdout.write(f"{job.action.capitalize()} job {job.pk} of {job.study}:")
        job = follow_job(job, self.stdout.write)
        if job.status == StudyJob.Status.FAILED:
            raise CommandError(job.error)
        return job

    def do_gate(self, *, actor, study, **_):
        for result in study_gate(study=_study(study, actor, change=True), actor=actor):
            self._print_gate(result)

    def _print_gate(self, result: GateResult) -> None:
        evidence = result.evidence
        verdict = gate_state_of(evidence).label.upper()
        self.stdout.write(
            f"{result.transformation}: {verdict} (gate result {result.pk}), {evidence['n_items']} items, "
            f"{evidence['n_ratings']} ratings {'; '.join(evidence['reasons'])}"
        )
        for question, s in evidence["questions"].items():
            ac2 = f"{s['ac2']['value']:.3f} (SE {s['ac2']['se']:.3f})" if s["ac2"] else "n/a"
            alpha = f"{s['alpha']:.3f}" if s["alpha"] is not None else "n/a"
            mean = f"{s['mean']:.2f} ± {s['sd'] or 0:.2f}" if s["mean"] is not None else "n/a"
            self.stdout.write(f"  {question}: mean {mean}, AC2 {ac2}, alpha {alpha}")

    def do_status(self, *, actor, study, **_):
        study = _study(study, actor)
        progress = study_progress(study=study)
        self.stdout.write(
            f"{study} [{study.status}] {progress.n_real} real items + {progress.n_controls} controls, "
            f"{progress.n_complete} complete"
        )
        if study.is_locked:
            self.stdout.write(study_control_detectability(study=study).summary())
            for line in study_detectability_notes(study):
                self.stdout.write(f"  {line}")
        for a in progress.annotators:
            rate = f"{a.control_pass_rate:.0%}" if a.control_pass_rate is not None else "-"
            self.stdout.write(
                f"  {a.annotator.user.username:<16} {a.annotator.status:<9} assigned {a.assigned:>4}, "
                f"submitted {a.items_rated:>4} (controls {a.controls_rated} of {a.controls_assigned}, "
                f"check {a.control_status or '-'}, pass {rate}), "
                f"flags open {a.open_flags} confirmed {a.confirmed_flags}"
            )
        for row in study_adaptive_rows(study=study):
            self.stdout.write(f"  adaptive {row.transformation}: {row.decision.summary()}")
            if row.basis_shown and not row.outcome.waiting_for_judge:
                self.stdout.write(f"    on {row.outcome.basis()}")
            for question, a in row.judge_rows:
                corr = "-" if a["correlation"] is None else f"{a['correlation']:.2f}"
                self.stdout.write(
                    f"    judge on {question}: correlation {corr}, bias {a['bias']:+.2f}, weight {a['weight']:.2f}, "
                    f"judges' mean {a['judge_mean']:.2f} over {row.outcome.judge_outputs} outputs, "
                    f"estimate {a['estimate']:.2f}"
                )
            self.stdout.write(f"    {row.forecast_line}")
        for name in sorted({r.transformation for r in study.runs.all()}):
            current = gate_result_current(study=study, transformation=name)
            if current is not None:
                self._print_gate(current)

    def do_annotators(self, *, actor, study, **_):
        report = study_annotator_quality(study=_study(study, actor))
        self.stdout.write(
            f"{'annotator':<16} {'status':<9} {'items':>5} {'med s':>6} {'fast':>5} {'run':>4} {'H bits':>6} "
            f"{'controls':>9} {'|d| peers':>9} {'rho':>5} {'|d| LLM':>7}  competence [95% CI]  bias  care"
        )

        def fmt(value, spec):
            return "-" if value is None else format(value, spec)

        for row in report.rows:
            q, c = row.quality, row.competence
            competence = f"{c.competence:.2f} [{fmt(c.ci_low, '.2f')}, {fmt(c.ci_high, '.2f')}]" if c else "-"
            if c:
                competence += f"  {c.bias:+.2f}  {fmt(row.carefulness, '.2f')}"
                competence += "  flagged: low carefulness" if row.carefulness_flagged else ""
            if q is None:
                self.stdout.write(f"{row.username:<16} {row.annotator.status:<9} {0:>5}  no rating yet  {competence}")
                continue
            controls = f"{q.controls.n_within}/{q.controls.n_checked}" if q.controls.n_checked else "-"
            self.stdout.write(
                f"{row.username:<16} {row.annotator.status:<9} {q.n_items:>5} "
                f"{fmt(q.timing.median_seconds, '.1f'):>6} {fmt(q.timing.share_too_fast, '.0%'):>5} "
                f"{q.straight_lining.longest_run:>4} {fmt(q.straight_lining.entropy_bits, '.2f'):>6} {controls:>9} "
                f"{fmt(q.deviation.peer_mad, '.2f'):>9} {fmt(q.deviation.peer_spearman, '.2f'):>5} "
                f"{fmt(q.deviation.llm_mad, '.2f'):>7}  {competence}"
            )
        if report.carefulness_floor is not None:
            self.stdout.write(
                f"Low carefulness flags a carefulness below {report.low_carefulness:g} x the upper quartile "
                f"= {report.carefulness_floor:.3f}."
            )

    def do_review(self, *, actor, flag, decision, note, **_):
        if actor is None:
            raise CommandError("say who reviews: --as USERNAME (a researcher)")
        flags = scoped(Flag.objects.select_related("rating__study_item__study__project"), actor, via=FLAG_PROJECT)
        try:
            flag = flags.get(pk=flag)
        except Flag.DoesNotExist:
            raise CommandError(f"no flag {flag}") from None
        project_require_write(actor, flag.rating.study_item.study.project)
        flag_review(flag=flag, decision=decision, note=note, actor=actor)
        self.stdout.write(f"Flag {flag.pk} {decision}.")

    def do_reject_annotator(self, *, actor, study, username, reason, **_):
        if actor is None:
            raise CommandError("say who rejects: --as USERNAME (a researcher)")
        annotator = _study(study, actor, change=True).annotators.filter(user__username=username).first()
        if annotator is None:
            raise CommandError(f"{username} does not annotate {study}")
        result = annotator_reject(annotator=annotator, detail=reason, actor=actor)
        moved = result.release.summary() if result.release else "they had no items"
        self.stdout.write(f"Rejected {username} (no access to {annotator.study} any more): {moved}.")

    def do_replace_annotator(self, *, actor, study, username, by, reason, **_):
        if actor is None:
            raise CommandError("say who replaces: --as USERNAME (a researcher)")
        annotator = _study(study, actor, change=True).annotators.filter(user__username=username).first()
        if annotator is None:
            raise CommandError(f"{username} does not annotate {study}")
        (user,) = roster_annotators(annotator.study.project, [by])
        result = annotator_replace(annotator=annotator, user=user, reason=reason, actor=actor)
        self.stdout.write(f"{by} replaces {username} in {annotator.study}: {result.release.summary()}.")
        new_accounts_report(self.stdout, result.new_accounts)

    def do_decide(self, *, actor, study, transformation, decision, comment, **_):
        if actor is None:
            raise CommandError("say who decides: --as USERNAME (a researcher)")
        result = gate_result_current(study=_study(study, actor, change=True), transformation=transformation)
        if result is None:
            raise CommandError(f"{transformation} has no gate result in {study}: run `study gate` first")
        approval_decide(gate_result=result, decision=decision, comment=comment, actor=actor)
        self.stdout.write(f"{transformation}: {decision} recorded.")
