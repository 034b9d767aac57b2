"""Invitations (issue 42): an owner or admin invites annotators from the project page, no shell.

- :func:`invitation_create` makes a one-time link (``/invitations/<secret>/``). Only the SHA-256 of
  its secret is stored; the link is shown once to whoever made it, and mailed to the address given
  where a mail server is configured (``SHIFTLAB_EMAIL_HOST``); the demo has none, so the inviter
  passes the link on. It expires after ``SHIFTLAB_INVITATION_DAYS`` days (7) unless chosen otherwise,
  and its owners and admins may revoke it while it waits.
- :func:`invitation_accept`: whoever opens the link chooses their own Shiftlab username and password
  (nobody else ever sees them) and becomes an annotator on the project's roster; the Argilla
  password comes next, on *My Argilla account*. An annotator already signed in joins with their own
  account instead. A researcher or admin cannot accept (they would need an annotator account).
- Creating, accepting and revoking are audited in the project. An owner may invite although only
  admins put an *existing* annotator on a roster (``core.rosters``): an invitation pulls nobody in
  by name; the person who opens it chooses to join.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from core.errors import ConflictError, NotFoundError, ShiftlabError
from core.models import Invitation, Project, ProjectAnnotator
from core.projects import ProjectAccessError, User, project_can_manage
from core.roles import Role, has_role
from core.rosters import annotator_audit
from core.services import audit_record

MAX_DAYS = 30
#: What an invitation link says when it cannot be used: the same for an unknown secret and a
#: mistyped one, so that a guess learns nothing.
NOT_VALID = "This invitation link is not valid: check that you copied all of it, or ask for a new one."


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def invitation_state(invitation: Invitation, *, now=None) -> str:
    """ "accepted", "revoked", "expired" or "pending"."""
    if invitation.accepted_at is not None:
        return "accepted"
    if invitation.revoked_at is not None:
        return "revoked"
    if invitation.expires_at <= (now or timezone.now()):
        return "expired"
    return "pending"


@dataclass(frozen=True)
class IssuedInvitation:
    """A new invitation and its secret: the only time the secret exists outside the link."""

    invitation: Invitation
    token: str

    def path(self) -> str:
        return f"/invitations/{self.token}/"


def invitation_create(*, project: Project, actor: User, email: str = "", days: int | None = None) -> IssuedInvitation:
    """A one-time link that puts its holder on ``project``'s roster (owners, admins, the system)."""
    if actor is not None and not project_can_manage(actor, project):
        raise ProjectAccessError(f"Only admins and owners of {project.slug!r} invite annotators.")
    days = settings.INVITATION_DAYS if days is None else days
    if not 1 <= days <= MAX_DAYS:
        raise ShiftlabError(f"An invitation lasts 1 to {MAX_DAYS} days, not {days}.", field="days")
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        invitation = Invitation.objects.create(
            project=project,
            token_digest=token_digest(token),
            email=email.strip(),
            created_by=actor,
            expires_at=timezone.now() + timedelta(days=days),
        )
        audit_record(
            actor=actor,
            verb="annotator.invitation.create",
            obj=invitation,
            payload={"email": invitation.email, "expires_at": invitation.expires_at.isoformat(), "days": days},
            project=project,
        )
    return IssuedInvitation(invitation, token)


def invitation_mail(issued: IssuedInvitation, *, link: str) -> bool:
    """Mail ``link`` to the invitation's address where a mail server is configured; False otherwise
    (the page then says to pass the link on). A mail server that refuses is an error to show."""
    invitation = issued.invitation
    if not invitation.email or not settings.INVITATIONS_BY_MAIL:
        return False
    project = invitation.project
    body = (
        f"You are invited to rate texts for the Shiftlab project {project.name or project.slug}.\n\n"
        f"Open this link to choose your username and password (it works once, until "
        f"{invitation.expires_at:%Y-%m-%d %H:%M} UTC):\n{link}\n"
    )
    try:
        send_mail(f"Invitation to annotate for {project.name or project.slug}", body, None, [invitation.email])
    except OSError as exc:
        raise ShiftlabError(
            f"The invitation was made, but the mail server refused it ({exc}); pass the link on yourself."
        ) from None
    return True


def invitation_by_token(token: str) -> Invitation:
    """The invitation of a link's secret, whatever its state; NotFoundError for anything else."""
    invitation = Invitation.objects.select_related("project", "created_by").filter(token_digest=token_digest(token))
    found = invitation.first()
    if found is None:
        raise NotFoundError(NOT_VALID)
    return found


def invitation_usable(invitation: Invitation) -> None:
    """Refuse an invitation that was used, revoked or has expired, saying which."""
    state = invitation_state(invitation)
    if state == "accepted":
        raise ConflictError("This invitation has been used already: each link works once. Sign in instead.")
    if state == "revoked":
        raise ConflictError("This invitation was withdrawn. Ask the project's owner for a new one.")
    if state == "expired":
        raise ConflictError(
            f"This invitation expired on {invitation.expires_at:%Y-%m-%d %H:%M} UTC. Ask the project's owner "
            "for a new one."
        )


def invitation_accept(
    *, token: str, user: AbstractBaseUser | None = None, username: str = "", password: str = ""
) -> AbstractBaseUser:
    """Use the link ``token``: as the signed-in annotator ``user``, or as a new annotator account
    ``username``/``password`` chosen now. Returns the annotator, now on the project's roster."""
    with transaction.atomic():
        invitation = invitation_by_token(token)
        invitation = Invitation.objects.select_for_update().select_related("project").get(pk=invitation.pk)
        invitation_usable(invitation)
        if user is not None and user.is_authenticated:
            if not has_role(user, Role.ANNOTATOR) or user.is_superuser:
                raise ShiftlabError(
                    f"You are signed in as {user.get_username()}, who is not an annotator: sign out, then open "
                    "the link again to make an annotator account."
                )
            annotator = user
        else:
            annotator = _new_annotator(username, password)
        project = invitation.project
        entry, created = ProjectAnnotator.objects.get_or_create(
            project=project, user=annotator, defaults={"added_by": invitation.created_by}
        )
        invitation.accepted_by, invitation.accepted_at = annotator, timezone.now()
        invitation.save(update_fields=["accepted_by", "accepted_at"])
        annotator_audit(
            actor=annotator,
            verb="annotator.invitation.accept",
            user=annotator,
            obj=invitation,
            payload={"invited_by": invitation.created_by.get_username() if invitation.created_by else ""},
            project=project,
        )
        if created:
            annotator_audit(
                actor=annotator,
                verb="annotator.roster.add",
                user=annotator,
                obj=project,
                payload={"by_invitation": invitation.pk},
                project=project,
            )
    return annotator


def _new_annotator(username: str, password: str) -> AbstractBaseUser:
    users = get_user_model()
    username = username.strip()
    if not username:
        raise ShiftlabError("Choose a username.", field="username")
    field = users._meta.get_field(users.USERNAME_FIELD)
    try:
        field.run_validators(username)
    except ValidationError as exc:
        raise ShiftlabError(" ".join(exc.messages), field="username") from None
    if users.objects.filter(**{f"{users.USERNAME_FIELD}__iexact": username}).exists():
        raise ShiftlabError(f"The username {username!r} is taken: choose another.", field="username")
    candidate = users(**{users.USERNAME_FIELD: username})
    try:
        password_validation.validate_password(password, candidate)
    except ValidationError as exc:
        raise ShiftlabError(" ".join(exc.messages), field="password1") from None
    candidate.set_password(password)
    candidate.save()
    group, _ = Group.objects.get_or_create(name=Role.ANNOTATOR)
    candidate.groups.add(group)
    return candidate


def invitation_revoke(*, invitation: Invitation, actor: User) -> None:
    """Withdraw a waiting invitation (its project's owners and admins)."""
    if actor is not None and not project_can_manage(actor, invitation.project):
        raise ProjectAccessError(f"Only admins and owners of {invitation.project.slug!r} withdraw its invitations.")
    with transaction.atomic():
        invitation = Invitation.objects.select_for_update().select_related("project").get(pk=invitation.pk)
        invitation_usable(invitation)
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
        audit_record(
            actor=actor,
            verb="annotator.invitation.revoke",
            obj=invitation,
            payload={"email": invitation.email},
            project=invitation.project,
        )


def invitations_waiting(project: Project):
    """The project's invitations nobody has used, revoked or let expire yet, newest first."""
    return Invitation.objects.filter(
        project=project, accepted_at=None, revoked_at=None, expires_at__gt=timezone.now()
    ).select_related("created_by")
