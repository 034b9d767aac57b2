"""The commands' one error boundary: a base class for every Shiftlab management command.

``ShiftlabCommand`` turns a ``ShiftlabError`` raised anywhere in ``handle`` into Django's
``CommandError`` (its message on stderr, exit status 1, no traceback), and resolves ``--as USER``
for commands that act for a researcher.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ShiftlabError


class ShiftlabCommand(BaseCommand):
    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except ShiftlabError as exc:
            raise CommandError(str(exc)) from exc

    @staticmethod
    def add_actor_argument(parser: CommandParser) -> None:
        parser.add_argument(
            "--as", dest="actor", help="Act as this researcher: their projects only, audited under their name."
        )
