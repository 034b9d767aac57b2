"""Errors the user can act on. Pages, the API and commands turn them into messages, not tracebacks.

No Django here: pure modules raise these too. Each interface renders them in one place —
``core.api_errors.exception_handler`` (DRF), ``core.pages.show_error`` (pages) and
``core.commands.ShiftlabCommand`` (management commands) — so no view, route or command translates
an error by hand.
"""


class ShiftlabError(Exception):
    """Base class of errors whose message tells the user what was wrong and what to do.

    ``field`` names the input the message is about (``"project"``, ``"seeds"``): the API answers
    ``{field: [message]}`` and a page form puts it next to that field. ``http_status`` is the status
    the API answers with; subclasses set their own.
    """

    http_status = 400

    def __init__(self, message: str = "", *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class NotFoundError(ShiftlabError):
    """The object named does not exist, or the caller may not read it (answered alike: 404)."""

    http_status = 404


class ConflictError(ShiftlabError):
    """The action conflicts with the object's state (in use, already locked): 409."""

    http_status = 409


class TooLargeError(ShiftlabError):
    """An input over a documented size limit: 413."""

    http_status = 413
