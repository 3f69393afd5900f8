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


def test_reasons_and_log_excerpts_shown_to_visitors_do_not_reveal_server_folders(tmp_path):
    import sys

    from leaderboard.app import Views
    from leaderboard.store import Store

    store = Store(tmp_path / "store")
    store.queue.add(id="s1", content_hash="sha256:1", owner="ada", model="m", model_id=None, model_revision=None,
                    dataset="culturelens/cube-1k:cube_1k:test")
    store.queue.claim("w", 60)
    library = f"{sys.prefix}/lib/site-packages/torch/nn/modules/module.py"
    store.queue.fail("s1", "w", f"the dataset is not available: no local copy in {store.root}/datasets/x__y",
                     f'Traceback:\n  File "{library}", line 1\nRuntimeError: out of memory')
    views = Views(store, "ada")
    details, _ = views.details("s1")
    assert "no local copy in STORE/datasets/x\\_\\_y" in details  # the file named, the folder not
    assert 'File "<python>/lib/site-packages/torch/nn/modules/module.py"' in details
    assert str(store.root) not in details and sys.prefix not in details
    _, table = views.queue()
    assert table.loc[0, "Details"].startswith("the dataset is not available: no local copy in STORE/datasets/")
