from django.conf import settings
from django.db import models
from django.utils import timezone

from core.waiting import Waiting


class AuditEvent(models.Model):
    """One decision or action by a person (or the system), kept forever.

    Later apps record researcher decisions here (approvals, rejections, flag reviews, exports)
    through ``core.services.audit_record``; rows are never updated or deleted by the application.
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events"
    )
    verb = models.CharField(max_length=64, help_text="What happened, e.g. 'dataset.import'.")
    object_type = models.CharField(max_length=100, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=255, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    project = models.ForeignKey(
        "Project",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
        help_text="The project of the object acted on: researchers read the events of their projects.",
    )
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        who = self.actor.get_username() if self.actor else "system"
        return f"{self.at:%Y-%m-%d %H:%M} {who} {self.verb} {self.object_repr}"


class TrackedJob(models.Model):
    """Long work that shows progress on its own row (runs, reports): status, ``done``/``total``
    steps (updated with ``F()`` by the tasks), the error a user can act on, who started it, and
    the backend it waits for while its tasks retry."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    waiting = models.JSONField(
        null=True,
        blank=True,
        default=None,
        help_text="While a task waits on a backend and retries: core.waiting.Waiting as JSON; null otherwise.",
    )

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def progress(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0

    @property
    def waiting_state(self) -> Waiting | None:
        """The backend the job waits for; None when it waits for none or has finished."""
        if not self.waiting or self.status not in (self.Status.PENDING, self.Status.RUNNING):
            return None
        return Waiting.from_json(self.waiting)

    @property
    def waiting_message(self) -> str | None:
        """:attr:`waiting_state` as a user reads it (the server's time zone), or None."""
        state = self.waiting_state
        return state.message(now=timezone.now(), tz=timezone.get_current_timezone()) if state else None


DEFAULT_PROJECT = "shiftlab"


class Project(models.Model):
    """A research group's space: its datasets, prompts, runs, studies, configs and benchmark runs
    belong to it, and its slug names the Argilla workspace of its studies. Researchers act only in
    projects they are members of; an ``open`` project (the default one, holding what existed before
    projects) lets every researcher in as a member."""

    slug = models.SlugField(max_length=61, unique=True, help_text="Also the Argilla workspace of its studies.")
    name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    open = models.BooleanField(default=False, help_text="Every researcher acts as a member.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


def default_project_pk() -> int:
    """Default of every owned model's ``project``: code that names no project writes to the open
    default project (what existed before projects lives there too)."""
    project, _ = Project.objects.get_or_create(
        slug=DEFAULT_PROJECT, defaults={"name": "Shared default project", "open": True}
    )
    return project.pk


def project_field(related_name: str) -> models.ForeignKey:
    """The ``project`` foreign key of a model a project owns (datasets, prompts, runs, studies...)."""
    return models.ForeignKey(
        Project,
        on_delete=models.PROTECT,
        related_name=related_name,
        default=default_project_pk,
        help_text="The project (team) it belongs to; see core.projects for who may read and change it.",
    )


class Membership(models.Model):
    """A user's role in a project: owners also manage members, viewers only read."""

    class Role(models.TextChoices):
        OWNER = "owner"
        MEMBER = "member"
        VIEWER = "viewer"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "user"]
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.project}"


class ProjectAnnotator(models.Model):
    """An annotator on a project's roster: the project's researchers may publish its studies to
    them, replace others by them and see them; nobody else's. An annotator on two rosters is one
    person, with one Argilla account that only they set the password of (``core.rosters``)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="roster")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="rosters")
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "user"]
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_roster_entry_per_annotator")]

    def __str__(self) -> str:
        return f"{self.user} annotates for {self.project}"


class Invitation(models.Model):
    """A one-time link that makes whoever opens it an annotator on a project's roster (issue 42).

    Only a digest of the link's secret is kept: the link is shown once, to the owner or admin who
    made it (and mailed where a mail server is configured). It works once, until ``expires_at``,
    unless revoked; the person who opens it chooses their own username and passwords
    (``core.invitations``)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    token_digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the link's secret.")
    email = models.EmailField(blank=True, help_text="Where the link was mailed, if it was.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invitation #{self.pk} to {self.project}"
