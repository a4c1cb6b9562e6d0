"""What can go wrong with a class, each as one sentence the app shows as it is (never a traceback)."""

from __future__ import annotations


class ClassError(Exception):
    """The base: ``str(e)`` is one sentence for the user, and nothing was written."""


class BadInput(ClassError):
    """Something given is not acceptable (a nickname, a class name, a question that does not exist)."""


class NicknameTaken(BadInput):
    """Another student of the class has this nickname."""


class Conflict(ClassError):
    """An answer's idempotency key was stored before with another option (the same student answering the same
    attempt in two tabs): nothing was written; ``stored`` is the option the database holds."""

    def __init__(self, message: str, stored: str):
        super().__init__(message)
        self.stored = stored


class NotFound(ClassError):
    """No such class (a wrong link, or a deleted class), or no such student in it."""


class Closed(ClassError):
    """The class takes no more students or answers."""


class Forbidden(ClassError):
    """The teacher's secret is wrong (mistyped, truncated, another class's)."""


class DatabaseError(ClassError):
    """The database cannot be used: a wrong or unreachable URL, a failed migration, a lost connection. The message
    never holds the URL's password."""
