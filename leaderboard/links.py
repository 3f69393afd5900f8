"""Where a model or a paper lives on the web: an http(s) address built only from text that was checked; and a
model's page on this leaderboard (``model_page``), where every table's model name links.

A submission's ``model.id`` is the submitter's text ("Hub id or URL of the model"): it becomes a link only when
it is a Hugging Face repo id (``https://huggingface.co/ID``) or an absolute http(s) URL without user name or
password; anything else (``javascript:``, a bare host, "Google Imagen 4 (API)") is shown as text. A paper row
links to its paper through the arXiv id its citation names (``benchmark.track.Paper.text``).
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

from benchmark.submission.manifest import is_repo_id

HUB = "https://huggingface.co/"
ARXIV = "https://arxiv.org/abs/"
ARXIV_ID = re.compile(r"arXiv:(\d{4}\.\d{4,5})(?:v\d+)?")
MAX_URL = 2000  # characters: longer addresses are not links (browsers and servers refuse far shorter ones)
# What stays as it is in a link's address: the URL syntax characters, less those that end or break a Markdown
# link destination or an HTML attribute (space, quotes, parentheses, brackets, angle brackets, backslash).
_SAFE = ":/?#@!$&*+,;=%-._~"


def _address(url: str) -> str:
    """``url`` with every character outside ``_SAFE`` and letters/digits percent-encoded (UTF-8)."""
    return quote(url, safe=_SAFE)


def model_url(model_id: object) -> str | None:
    """The model's page: ``https://huggingface.co/ID`` for a Hub repo id (ORG/NAME), the address itself for an
    absolute http(s) URL with a host and no credentials; None for anything else."""
    if not isinstance(model_id, str):
        return None
    text = model_id.strip()
    if is_repo_id(text):
        return HUB + text
    if len(text) > MAX_URL or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in text):
        return None
    try:
        parts = urlsplit(text)
    except ValueError:  # e.g. an unbalanced IPv6 bracket
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        return None
    return _address(text)


def model_page(model: object) -> str | None:
    """The model's page on this leaderboard, by name: ``?tab=model&model=NAME`` (an address relative to the page,
    the name percent-encoded whole, so nothing in it ends the link or adds a parameter); None without a name."""
    if not isinstance(model, str) or not model:
        return None
    return "?tab=model&model=" + quote(model, safe="")


def paper_url(citation: object) -> str | None:
    """``https://arxiv.org/abs/ID`` for a citation that names ``arXiv:ID``; None otherwise."""
    found = ARXIV_ID.search(citation) if isinstance(citation, str) else None
    return ARXIV + found.group(1) if found else None
