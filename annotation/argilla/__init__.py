"""Adapter to Argilla, the annotation tool where annotators rate study items.

``client`` is the only module that talks to an Argilla server (its REST API, over httpx);
``local_server`` runs the local server (``annotation/argilla_local``) as a child process. Both
raise ``ArgillaError``.
"""

from core.errors import ShiftlabError


class ArgillaError(ShiftlabError):
    """Argilla could not be reached or refused a request; the message names the server and what to do.
    The API answers 502: the fault lies with the server behind Shiftlab."""

    http_status = 502
    code = "argilla"


class ArgillaUnavailable(ArgillaError):
    """Argilla could not be reached at all (connection refused, timeout): worth retrying later."""
