"""The one base of CultureLens's user errors.

A user error is something the person running a verb can fix: a missing file, a malformed setting, a dataset that
cannot be reached, a submission over a limit. Its message is one sentence that says what went wrong, where, and
what to do; the ``culturelens`` command prints it as ``error: <message>`` with exit status 2. Any other exception
is a bug and keeps its traceback.
"""

from __future__ import annotations


class CultureLensError(Exception):
    """A user error: one sentence that says what, where and what to do; the CLI prints it with exit status 2."""


class OutputExists(CultureLensError, FileExistsError):
    """An output path exists and may not be replaced (nothing of ours made it); the message names it and says to
    choose another. Still a FileExistsError for code that catches that."""
