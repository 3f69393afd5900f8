"""The one base of user errors.

A ``CultureLensError`` is a mistake a user can fix: its message is one sentence that says what, where and what to
do. The command line prints it with exit status 2; anything else is a bug and keeps its traceback.
"""


class CultureLensError(Exception):
    """A user error: one sentence that says what, where and what to do (the CLI prints it, exit status 2)."""
