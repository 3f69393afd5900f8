"""``culturelens``: one console script, one verb per job.

The verbs come from the modules of ``culturelens.verbs`` and from every registered track (``benchmark.tracks``),
all declared the same way (``benchmark.track.Verb``). A verb's options are added only when it is chosen
(``_Verbs``), so ``culturelens --help`` lists the verbs without importing what their options need (no torch).
Every verb that may reach the Hugging Face Hub first checks within seconds that it can, else works offline
(``culturelens.hub_access``). Errors are handled here, once: a ``CultureLensError`` (a user's mistake) is one
sentence on stderr with exit status 2 (PyTorch or a model library missing from the app-only install too:
``benchmark.errors.full_install_for``); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Sequence

from benchmark import __version__
from benchmark.errors import CultureLensError, full_install_for
from benchmark.track import Verb
from culturelens.hub_access import hub_reachable, offline_unless_hub_reachable  # noqa: F401 - part of the CLI's API

EXIT_ERROR = 2  # a user error (argparse uses 2 for a bad command line too); 1 is a check that failed
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C (SIGINT), as a shell reports it: 128 + 2

# Verbs that only group others: (help, example, metavar of their sub-verbs).
GROUPS = {
    ("data",): ("build and publish datasets", "culturelens data build cube-1k --out data/cube-1k", "ACTION"),
    ("data", "build"): ("build a dataset folder laid out like its Hub repo (Parquet + card)",
                        "culturelens data build cube-1k --source cube_1k.json --out data/cube-1k", "DATASET"),
    ("suite",): ("the suite: one benchmark definition for every track; build its datasets and assets, publish them",
                 "culturelens suite build --out suite/ && culturelens suite push suite/ --repo culturelens/suite",
                 "ACTION"),
    ("hub",): ("mirror the store's requests and results to Hub dataset repos, or restore from them",
               "culturelens hub push --requests my-org/culturelens-requests --results my-org/culturelens-results",
               "ACTION"),
}

EPILOG = """example:
  culturelens data build cube-1k --out data/cube-1k
  culturelens validate submissions/example && culturelens submit submissions/example --wait
  culturelens serve

exit status: 0 done; 1 a check said no (a submission rejected, a job failed, a result not reproduced within
--tolerance); 2 an error, said in one sentence on stderr."""


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Examples kept as written; an option's default shown unless it is None or False, or its help already
    says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


class _Verbs(argparse._SubParsersAction):
    """Sub-commands whose options are added when one is chosen, so that listing them imports nothing their
    options need (``culturelens --help`` must not load torch)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.options: dict[str, Callable[[argparse.ArgumentParser], None]] = {}

    def __call__(self, parser, namespace, values, option_string=None):
        add_options = self.options.pop(values[0], None)
        if add_options is not None and values[0] in self._name_parser_map:
            add_options(self._name_parser_map[values[0]])
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{"formatter_class": _Formatter, **kwargs})
        self.register("action", "parsers", _Verbs)


def verbs() -> list[Verb]:
    """Every verb, in the order ``--help`` lists them: the command line's own, then each track's, then the Hub
    mirror's."""
    from benchmark import tracks
    from culturelens.verbs import data, hub, scoring, service, submissions, suite

    own = [*data.VERBS, *suite.VERBS, *submissions.VERBS, *service.VERBS[:1], *scoring.VERBS, *service.VERBS[1:]]
    return [*own, *(v for t in tracks.all_tracks().values() for v in t.verbs), *hub.VERBS]


def environment_note() -> str:
    """The epilog's last paragraph: every environment variable read (``leaderboard.operator_settings``)."""
    from leaderboard.operator_settings import environment

    names = ", ".join(sorted({s.env for s in environment()}))
    return textwrap.fill(f"environment (where a flag exists, the variable is its fallback; docs/operating/"
                         f"settings.md, \"Environment\", says what each does): {names}.", width=110)


def parser() -> argparse.ArgumentParser:
    """The command line. Each verb's options are added only when that verb is chosen (``_Verbs``)."""
    root = _Parser(prog="culturelens", epilog=f"{EPILOG}\n\n{environment_note()}",
                   description="CultureLens: benchmark and leaderboard for the cultural competence of text-to-image "
                               "models.")
    root.add_argument("--version", action="version", version=f"culturelens {__version__}")
    _add_verbs(root, (), verbs(), "VERB")
    return root


def _add_verbs(parser: argparse.ArgumentParser, path: tuple[str, ...], every: Sequence[Verb], metavar: str) -> None:
    """The verbs directly under ``path``, and the groups that lead to deeper ones, in the order first named."""
    sub = parser.add_subparsers(dest="_".join(("verb", *path)), required=True, metavar=metavar)
    children: dict[str, Verb | tuple[str, ...]] = {}
    for verb in every:
        if verb.under == path:
            children.setdefault(verb.name, verb)
        elif verb.under[:len(path)] == path and len(verb.under) > len(path):
            children.setdefault(verb.under[len(path)], verb.under[:len(path) + 1])
    for name, child in children.items():
        if isinstance(child, Verb):
            help_text, example, options = child.help, child.example, child.options
        else:
            help_text, example, below = GROUPS[child]
            options = (lambda group, below: lambda p: _add_verbs(p, group, every, below))(child, below)
        sub.add_parser(name, help=help_text, description=help_text, epilog=f"example:\n  {example}")
        sub.options[name] = options


def run(args: argparse.Namespace) -> int:
    """Run the verb ``args`` chose (``args.run``) and return its exit status. A user error
    (``CultureLensError``, from the verb or anything it calls, a model library the app-only install lacks included)
    is printed as one line, ``error: <message>``, and gives status 2; Ctrl-C is one line too, ``stopped: ...`` with
    what the verb keeps and how to go on where it says so (``args.on_interrupt``), and status 130; any other
    exception is a bug and propagates with its traceback."""
    try:
        verb = getattr(args, "verb", None)
        with full_install_for(f"`culturelens {verb}`" if verb else "this command"):
            if getattr(args, "hub", False):  # the verb may load datasets or weights from the Hub
                offline_unless_hub_reachable()
            return args.run(args)
    except CultureLensError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        said = getattr(args, "on_interrupt", None)
        print(f"\nstopped (Ctrl-C){f': {said(args)}' if said else ''}", file=sys.stderr)
        return EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    """The ``culturelens`` console script: parse ``argv`` (default: the process's arguments) and ``run`` it."""
    return run(parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
