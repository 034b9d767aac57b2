"""Errors the user can act on. Pages, the API and commands turn them into messages, not tracebacks.

No Django here: pure modules raise these too. Each interface renders them in one place —
``core.api_errors.exception_handler`` (DRF), ``core.pages.refusals`` (pages) and
``core.commands.ShiftlabCommand`` (management commands) — so no view, route or command translates
an error by hand, and none reads an error's message to decide anything.

The class says what kind of refusal it is and so the status every interface answers with:
``InvalidError`` (or plain ``ShiftlabError``) 400, ``ForbiddenError`` 403, ``NotFoundError`` 404,
``ConflictError`` 409, ``TooLargeError`` 413. ``code`` is a short, stable snake_case name of the
refusal for API clients (the class's default, or one given where it is raised); ``field`` names the
input the message is about, always explicitly where it is raised.
"""


class ShiftlabError(Exception):
    """Base class of errors whose message tells the user what was wrong and what to do.

    ``field`` names the input the message is about (``"project"``, ``"seeds"``): the API answers
    ``{field: [message], "code": code}`` and a page form puts it next to that field. ``code`` is a
    stable name of the refusal (the class's ``code`` unless given). ``http_status`` is the status
    the API answers with; subclasses set their own. A plain ``ShiftlabError`` is an invalid input (400).
    """

    http_status = 400
    code = "invalid"

    def __init__(self, message: str = "", *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        if code is not None:
            self.code = code


class InvalidError(ShiftlabError):
    """The input breaks a rule (out of range, inconsistent, of the wrong kind): 400."""


class ForbiddenError(ShiftlabError):
    """The caller may see the object but not do this to it: 403."""

    http_status = 403
    code = "forbidden"


class NotFoundError(ShiftlabError):
    """The object named does not exist, or the caller may not read it (answered alike: 404)."""

    http_status = 404
    code = "not_found"


class ConflictError(ShiftlabError):
    """The action conflicts with the object's state (in use, already locked, already running): 409."""

    http_status = 409
    code = "conflict"


class TooLargeError(ShiftlabError):
    """An input over a documented size limit: 413."""

    http_status = 413
    code = "too_large"
