from pathlib import Path

from django.core.management.base import CommandError

from annotation.configs.config_export import DEVELOPMENT_KEY_NOTE, format_of
from annotation.export_services import (
    BenchmarkConfigExportRequest,
    benchmark_config_export,
    benchmark_config_file_read,
    benchmark_config_verify,
)
from core.commands import ShiftlabCommand
from core.projects import user_by_name


class Command(ShiftlabCommand):
    help = (
        "Validated benchmark configs. `export`: every approved transformation of one project (--project, or "
        "those of --study) as YAML and/or JSON, signed with this server's key and with its own hash; "
        "`verify FILE`: reports whether "
        "the content hash matches and the file is exactly as exported, whether this deployment exported it, "
        "and whether its signature is valid under this server's key (exit status 1 unless a benchmark run "
        "would accept it)."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        export = sub.add_parser("export")
        export.add_argument(
            "--out", action="append", required=True, help="File to write, *.yaml/*.yml or *.json; repeat for both."
        )
        export.add_argument("--study", type=int, action="append", help="Only approvals of these study ids.")
        export.add_argument("--name", default="")
        export.add_argument(
            "--project", help="Only approvals of this project's studies (needed when several have approvals)."
        )
        export.add_argument(
            "--sides",
            nargs="+",
            help="Write the sides the config's runs perturb on retrieval datasets (query, document, both) into "
            "the config; without it the config leaves them to each run.",
        )
        export.add_argument(
            "--document-scope", help="With --sides: relevant_documents (default) or documents (the whole corpus)."
        )
        self.add_actor_argument(export)
        verify = sub.add_parser("verify")
        verify.add_argument("file")

    def handle(self, *args, action, **options):
        getattr(self, f"do_{action}")(**options)

    def do_export(self, *, out, study, name, actor, project, sides, document_scope, **_):
        formats = [(Path(path), format_of(path)) for path in out]
        user = user_by_name(actor) if actor else None
        config = benchmark_config_export(
            actor=user,
            request=BenchmarkConfigExportRequest(
                project=project, studies=study, name=name, sides=sides, document_scope=document_scope
            ),
        )
        for path, fmt in formats:
            path.write_text(config.json_text if fmt == "json" else config.yaml_text, encoding="utf-8")
            self.stdout.write(f"Wrote {path} ({fmt})")
        names = ", ".join(t["transformation"] for t in config.document["transformations"])
        self.stdout.write(f"Config {config.config_hash} of project {config.project} with {names}")
        if config.development_key:
            self.stdout.write(self.style.WARNING(f"Warning: {DEVELOPMENT_KEY_NOTE}; set SHIFTLAB_CONFIG_SIGNING_KEY"))

    def do_verify(self, *, file, **_):
        path = Path(file)
        check = benchmark_config_verify(text=benchmark_config_file_read(path=path), fmt=format_of(path.name))
        verification = check.verification
        if check.ok:
            self.stdout.write(f"content: OK, hash {verification.declared_hash} matches, canonical form")
            self.stdout.write(f"registered here: {'yes' if check.registered else 'no'}")
            why = f" ({verification.signature_problem})" if verification.signature_problem else ""
            self.stdout.write(f"signature: {verification.signature.value}{why}")
            if verification.development_key:
                self.stdout.write(f"key: {DEVELOPMENT_KEY_NOTE}")
        else:
            for problem in verification.problems:
                self.stderr.write(f"content: FAILED: {problem}")
            self.stdout.write("registered here, signature: not checked (the content does not verify)")
        if not check.ok:
            raise CommandError(f"{path} does not verify")
        if not check.accepted:
            raise CommandError(f"{path} verifies but a benchmark run refuses it: {check.acceptance.reason}")
        self.stdout.write(f"OK: {path} verifies and a benchmark run accepts it ({check.acceptance.reason})")
