"""MkDocs hook: a page's ``<!-- cli-help -->`` line becomes the ``--help`` of ``culturelens`` and of every verb,
generated from the parser the command line runs (``culturelens.cli.parser``), so the reference cannot drift."""

from __future__ import annotations

import argparse
import os

MARKER = "<!-- cli-help -->"


def _verbs(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    """(path, parser) for ``parser`` and every verb below it, each with its options added as choosing it adds
    them (``culturelens.cli._Verbs`` adds a verb's options only when it is chosen)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action._name_parser_map.items():
                add_options = getattr(action, "options", {}).pop(name, None)
                if add_options is not None:
                    add_options(sub)
                yield from _verbs(sub, (*path, name))


def cli_reference() -> str:
    """Every ``culturelens ... --help``, one section each, as a terminal 110 columns wide prints it."""
    from culturelens.cli import parser

    os.environ["COLUMNS"] = "110"  # argparse wraps to the terminal's width: the same page wherever it is built
    sections = []
    for path, sub in _verbs(parser(), ()):
        title = " ".join(("culturelens", *path))
        sections.append(f"### `{title}`\n\n```text\n{sub.format_help().rstrip()}\n```\n")
    return "\n".join(sections)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())
