"""User text in the app's Markdown: no links, images or markup from a model name or a file name."""

import re

from leaderboard.render import escape as _escape


def test_markdown_and_html_in_user_text_are_neutralised():
    text = "[click](http://evil) ![x](http://evil/x.png) <script>alert(1)</script> **bold** _it_"
    escaped = _escape(text)
    # no unescaped link or image syntax, no raw HTML, no emphasis
    assert not re.search(r"(?<!\\)\]\(", escaped) and "<script>" not in escaped and not re.search(r"(?<!\\)\*", escaped)
    assert escaped.startswith(r"\[click\](http://evil)") and "&lt;script&gt;" in escaped
    assert _escape("plain model name 2.1") == "plain model name 2.1"
