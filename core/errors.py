"""Errors the user can act on. Views, commands and tasks turn them into messages, not tracebacks."""


class ShiftlabError(Exception):
    """Base class of errors whose message tells the user what was wrong and what to do."""
