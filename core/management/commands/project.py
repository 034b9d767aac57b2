"""``manage.py project``: list projects, create them, and manage their members.

    manage.py project list [--as USER]
    manage.py project create SLUG [--name NAME] [--owner USER] [--open] [--as USER]
    manage.py project member SLUG USER [--role owner|member|viewer] [--as USER]
    manage.py project remove SLUG USER [--as USER]
    manage.py project annotator SLUG USER [--as USER]
    manage.py project annotator-remove SLUG USER [--as USER]
    manage.py project invite SLUG [--email ADDRESS] [--days N] [--url BASE] [--as USER]

Without ``--as`` the command acts as the system (an operator on the host); with it, as that user:
only admins create projects and put annotators on a project's roster, only admins and owners
manage members and take annotators off the roster.
"""

from django.core.management.base import CommandError

from core.commands import ShiftlabCommand
from core.invitations import invitation_create, invitation_mail
from core.models import Membership, Project
from core.projects import membership_remove, membership_set, project_create, projects_readable, user_by_name
from core.rosters import project_annotators, roster_add, roster_remove
from core.selectors import project_list


class Command(ShiftlabCommand):
    help = "List projects (teams), create them, and manage their members and roles."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        listing = sub.add_parser("list", help="Projects and their members.")
        create = sub.add_parser("create", help="A new project (admins).")
        create.add_argument("slug")
        create.add_argument("--name", default="")
        create.add_argument("--owner", help="Username of its first owner.")
        create.add_argument("--open", action="store_true", help="Every researcher acts as a member.")
        member = sub.add_parser("member", help="Add a member or change their role (admins, owners).")
        member.add_argument("slug")
        member.add_argument("username")
        member.add_argument("--role", default=Membership.Role.MEMBER, choices=Membership.Role.values)
        remove = sub.add_parser("remove", help="Take a member out of a project (admins, owners).")
        remove.add_argument("slug")
        remove.add_argument("username")
        annotator = sub.add_parser(
            "annotator", help="Put an annotator on the project's roster: its studies may be published to them (admins)."
        )
        annotator_remove = sub.add_parser("annotator-remove", help="Take an annotator off the roster (admins, owners).")
        for p in (annotator, annotator_remove):
            p.add_argument("slug")
            p.add_argument("username")
        invite = sub.add_parser(
            "invite", help="A one-time link that makes its holder an annotator of the project (admins, owners)."
        )
        invite.add_argument("slug")
        invite.add_argument("--email", default="", help="Also mail the link there (needs SHIFTLAB_EMAIL_HOST).")
        invite.add_argument("--days", type=int, default=None, help="Days the link works (default 7, at most 30).")
        invite.add_argument(
            "--url", default="http://127.0.0.1:8000", help="Address people open Shiftlab at (default: the demo's)."
        )
        for p in (listing, create, member, remove, annotator, annotator_remove, invite):
            p.add_argument("--as", dest="actor", help="Act as this user (default: the system).")

    def handle(self, *args, action, actor=None, **options):
        user = user_by_name(actor) if actor else None
        getattr(self, f"do_{action.replace('-', '_')}")(actor=user, **options)

    def do_list(self, *, actor, **_):
        for project, role in project_list(user=actor):
            members = ", ".join(f"{m.user.username} ({m.role})" for m in project.memberships.select_related("user"))
            flag = " open" if project.open else ""
            annotators = ", ".join(project_annotators(project).values_list("username", flat=True))
            self.stdout.write(
                f"{project.slug}{flag} [{role}]: {members or 'no members'}; annotators: {annotators or 'none'}"
            )

    def do_create(self, *, actor, slug, name, owner, open, **_):
        owner_user = user_by_name(owner) if owner else None
        project = project_create(slug=slug, name=name, owner=owner_user, actor=actor, open=open)
        self.stdout.write(self.style.SUCCESS(f"Project {project.slug} created{' (open)' if open else ''}."))

    def do_member(self, *, actor, slug, username, role, **_):
        project = self._project(actor, slug)
        membership_set(project=project, user=user_by_name(username), role=role, actor=actor)
        self.stdout.write(self.style.SUCCESS(f"{username} is {role} of {slug}."))

    def do_remove(self, *, actor, slug, username, **_):
        project = self._project(actor, slug)
        membership_remove(project=project, user=user_by_name(username), actor=actor)
        self.stdout.write(self.style.SUCCESS(f"{username} is no longer in {slug}."))

    def do_annotator(self, *, actor, slug, username, **_):
        roster_add(project=self._project(actor, slug), user=user_by_name(username), actor=actor)
        self.stdout.write(self.style.SUCCESS(f"{username} is an annotator of {slug}."))

    def do_annotator_remove(self, *, actor, slug, username, **_):
        roster_remove(project=self._project(actor, slug), user=user_by_name(username), actor=actor)
        self.stdout.write(self.style.SUCCESS(f"{username} is no longer an annotator of {slug}."))

    def do_invite(self, *, actor, slug, email, days, url, **_):
        issued = invitation_create(project=self._project(actor, slug), actor=actor, email=email, days=days)
        link = url.rstrip("/") + issued.path()
        mailed = invitation_mail(issued, link=link)
        until = f"{issued.invitation.expires_at:%Y-%m-%d %H:%M} UTC"
        self.stdout.write(
            self.style.SUCCESS(
                f"Invitation to {slug}{' mailed to ' + email if mailed else ''}; it works once, until {until}:"
            )
        )
        self.stdout.write(link)

    @staticmethod
    def _project(actor, slug: str) -> Project:
        project = projects_readable(actor).filter(slug=slug).first()
        if project is None:
            raise CommandError(f"No project {slug!r}: `manage.py project list` shows them.")
        return project
