"""``manage.py argilla_password USERNAME``: an operator with shell access sets the password of an
annotator's Argilla account (the demo, the tutorial, support). Researchers have no such path:
annotators set their own on Shiftlab's My Argilla account page.

The password is read from standard input (one line; typed twice at a terminal), never from the
command line, where other users of the host could read it; ``--generate`` prints a random one.
Audited, without the password, in every project whose roster holds the annotator.
"""

import getpass
import secrets
import sys

from django.core.management.base import CommandError

from annotation.studies.onboarding_services import argilla_password_set
from core.commands import ShiftlabCommand
from core.projects import user_by_name


class Command(ShiftlabCommand):
    help = "Set the password of an annotator's Argilla account (operators; read from standard input)."

    def add_arguments(self, parser):
        parser.add_argument("username", help="The annotator (their Shiftlab and Argilla username).")
        parser.add_argument("--generate", action="store_true", help="Generate a random password and print it.")

    def handle(self, *args, username, generate=False, **options):
        user = user_by_name(username)
        password = secrets.token_urlsafe(12) if generate else self._read_password()
        argilla_password_set(user=user, password=password, actor=None)
        self.stdout.write(self.style.SUCCESS(f"Argilla password of {username} set."))
        if generate:
            self.stdout.write(f"Password: {password}")

    @staticmethod
    def _read_password() -> str:
        if not sys.stdin.isatty():
            return sys.stdin.readline().rstrip("\n")
        first = getpass.getpass("New Argilla password: ")
        if first != getpass.getpass("Again: "):
            raise CommandError("The two passwords differ: nothing was changed.")
        return first
