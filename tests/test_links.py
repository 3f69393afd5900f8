"""Model and paper links: a model's name links to its page here (which links on to its Hub page or URL), a paper
row to its arXiv page, and nothing a submitter types can become another kind of link or break out of one."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from markdown_it import MarkdownIt

from benchmark.papers import CRT, CUBE
from leaderboard import display, links


@pytest.mark.parametrize("model_id, url", [
    ("stabilityai/stable-diffusion-xl-base-1.0", "https://huggingface.co/stabilityai/stable-diffusion-xl-base-1.0"),
    ("  black-forest-labs/FLUX.1-dev ", "https://huggingface.co/black-forest-labs/FLUX.1-dev"),
    ("https://example.org/models/x?v=2#card", "https://example.org/models/x?v=2#card"),
    ("http://example.org/a b(c)<d>", None),  # whitespace: not an address
    ("https://example.org/a(b)<c>\"d'", "https://example.org/a%28b%29%3Cc%3E%22d%27"),
    ("https://example.org/café", "https://example.org/caf%C3%A9"),
    ("javascript:alert(1)", None), ("JaVaScRiPt://example.org/%0aalert(1)", None),
    ("data:text/html,<script>x</script>", None), ("ftp://example.org/m", None),
    ("https://user:secret@example.org/m", None), ("https:///no-host", None), ("//example.org/m", None),
    ("../../etc/passwd", None), ("org/../x", None), ("Google Imagen 4 (API)", None), ("", None), (None, None),
])
def test_a_model_links_only_to_a_hub_page_or_an_http_address(model_id, url):
    assert links.model_url(model_id) == url


def test_paper_rows_link_to_the_arxiv_page_their_citation_names():
    assert links.paper_url(CRT.text) == "https://arxiv.org/abs/2511.11435"
    assert links.paper_url(CUBE.text) == "https://arxiv.org/abs/2407.06863"
    assert links.paper_url("a paper without an arXiv id") is None and links.paper_url(None) is None


def _rendered_links(markdown: str) -> list[tuple[str, str]]:
    """(href, text) of every link CommonMark finds in ``markdown`` (an independent renderer)."""
    rendered = MarkdownIt("commonmark").render(markdown)
    return [(href, re.sub(r"<[^>]+>", "", text)) for href, text in re.findall(r'<a href="([^"]*)">(.*?)</a>', rendered)]


def test_ranked_table_links_model_names_and_paper_sources():
    import html

    name = "SD [x](https://evil.example) *2*"
    frame = pd.DataFrame({
        "model": [name, "Imagen 4", "=cmd"], "model_id": ["org/sd", "Google Imagen 4 (API)", "javascript:x()"],
        "provenance": ["scored", "reported", "scored"], "value": [0.5, 0.4, 0.3], "ci_low": [0.4, None, 0.2],
        "ci_high": [0.6, None, 0.4], "n": [10, None, 10], "rank": [1, 2, 3], "rank_low": [1, None, 2],
        "rank_high": [2, None, 3], "tie_group": [1, None, 1], "beside": False, "model_type": "open",
        "parameters_billions": None, "scored_at": None, "protocol_id": "p", "on_protocol": True,
        "citation": [None, CRT.text, None], "source_table": [None, "Table 1", None],
        "harness_version": "0.1", "backbone": "clip", "seeds": "0,1", "submission_id": None})
    shown = display.display(frame)
    # the name percent-encoded whole: its brackets, parentheses and slashes end neither the link nor the address
    page = "?tab=model&amp;model=SD%20%5Bx%5D%28https%3A%2F%2Fevil.example%29%20%2A2%2A"
    assert _rendered_links(shown.loc[0, "Model"]) == [(page, html.escape(name))]
    assert _rendered_links(shown.loc[1, "Model"]) == [("?tab=model&amp;model=Imagen%204", "Imagen 4")]
    assert _rendered_links(shown.loc[2, "Model"]) == [("?tab=model&amp;model=%3Dcmd", "=cmd")]
    assert _rendered_links(shown.loc[1, "Source"]) == [("https://arxiv.org/abs/2511.11435",
                                                        "De Rosa Palmini &amp; Cetinic, arXiv:2511.11435")]
    assert list(shown["Provenance"]) == ["scored", "paper", "scored"]
    assert list(shown["Rank range (95%)"]) == ["1–2", "", "2–3"]
    assert display.datatypes(shown.columns)[:5] == ["number", "str", "str", "markdown", "number"]
