"""The commands' one error boundary: a base class for every Shiftlab management command.

``ShiftlabCommand`` turns a ``ShiftlabError`` raised anywhere in ``handle`` into Django's
``CommandError`` (its message on stderr, exit status 1, no traceback), after ``refused_heading``
when the command set one (e.g. "Nothing was imported."), and resolves ``--as USER`` for commands
that act for a researcher. No command catches ``ShiftlabError`` itself.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ShiftlabError


class ShiftlabCommand(BaseCommand):
    #: A line said before a refusal of what the command was doing; set in ``handle`` before doing it.
    refused_heading = ""

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except ShiftlabError as exc:
            raise CommandError("\n".join(filter(None, (self.refused_heading, str(exc))))) from exc

    @staticmethod
    def add_actor_argument(parser: CommandParser) -> None:
        parser.add_argument(
            "--as", dest="actor", help="Act as this researcher: their projects only, audited under their name."
        )
