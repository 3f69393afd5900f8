"""The README as a front door and the manual in docs/ (issue 51): every fenced shell and Python block runs here as
written, or names the test that runs it, or says why it cannot run offline (``tests/doc_blocks.py``); the site
builds in strict mode; every page is in the navigation; the README stays a short Space card."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.doc_blocks import ROOT, RUN, every_block, pages
from tests.helpers import readme_commands

BLOCKS = every_block()
RUN_HERE = [b for b in BLOCKS if not b.run_by and not b.not_run]


def _nav_pages(nav) -> list[str]:
    """The page files of mkdocs.yml's ``nav``, however deep its sections."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    return [p for value in nav.values() for p in _nav_pages(value)]


def test_docs_readme_is_a_front_door_of_at_most_250_lines_and_a_space_card():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py" and meta["hf_oauth"] is True
    assert "leaderboard" in meta["tags"]
    # The two set-up commands, exactly; then each user's first commands, each with a link onward to the manual.
    assert readme_commands("## Set-up: two commands") == [["make", "run"], ["make", "test"]]
    for heading in ("### A model builder: one generate, one submit", "### An operator: one build, one push, one serve",
                    "### A researcher: the prompts and a score from Python"):
        section = re.split(r"\n#{2,3} ", body.split(f"\n{heading}\n", 1)[1], maxsplit=1)[0]
        assert "](docs/" in section, heading
    researcher = body.split("### A researcher", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert "load_dataset(" in researcher and "culturelens.score(" in researcher
    # Citation: each paper by its arXiv id.
    for arxiv in ("2407.06863", "2511.11435", "2406.08482", "2506.09109", "2506.08835"):
        assert f"arXiv:{arxiv}" in body.split("## Citation", 1)[1]


def test_docs_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = _nav_pages(config["nav"])
    on_disk = sorted(p.relative_to(ROOT / "docs").as_posix() for p in pages() if p.parent != ROOT)
    assert len(in_nav) == len(set(in_nav)), "a page is in the nav twice"
    assert sorted(in_nav) == on_disk


def test_docs_every_block_runs_here_or_names_its_test_or_why_not():
    """A block marked ``run by`` names a test that exists and reads the block's page or heading; one marked
    ``not run`` says why in words; the rest run in ``test_docs_blocks_run_as_written``."""
    assert RUN_HERE, "no block runs here"
    # Every fence names its language, and only these: a shell block labelled `sh` or left bare would escape the runs.
    shown = {b.lang for b in every_block(langs=None)}
    assert shown <= {*RUN, "json", "text"}, shown
    for block in BLOCKS:
        if block.not_run is not None:
            assert len(block.not_run.split()) >= 4, f"{block.id}: say why it cannot run offline"
        if block.run_by:
            path, _, name = block.run_by.partition("::")
            source = (ROOT / path).read_text(encoding="utf-8")
            tests = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
            assert name in tests, f"{block.id}: {block.run_by} does not exist"
            page, heading = Path(block.page).name, block.heading.lstrip("# ")
            assert (page != "README.md" and page in source) or heading in source, \
                f"{block.id}: {path} reads neither {block.page} nor its heading {block.heading!r}"


@pytest.fixture(scope="session")
def checkout_after_make_run(tmp_path_factory, cube_file) -> Path:
    """A folder laid out as this checkout after `make run`'s first start: the repository's submissions/ and
    benchmarks/, and the store .culturelens with the default dataset, CUBE-1K, built from the authors' file."""
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import local_folder

    folder = tmp_path_factory.mktemp("checkout")
    for name in ("submissions", "benchmarks"):
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    cube_1k.build(str(cube_file), local_folder(folder / ".culturelens" / "datasets", cube_1k.HUB_REPO))
    return folder


@pytest.mark.slow  # each block as a reader runs it: a score of the example with the tiny CLIP takes 10 to 30 s
@pytest.mark.parametrize("block", RUN_HERE, ids=[b.id for b in RUN_HERE])
def test_docs_blocks_run_as_written(block, checkout_after_make_run, backbones_file, cube_file, tmp_path,
                                    monkeypatch):
    """Offline, from a copy of the checkout after `make run`, with the tests' tiny CLIP and DINOv2 named in
    CULTURELENS_BACKBONES (as the README says to do offline): a shell block exits 0 under `set -euo pipefail`, a
    Python block runs to its end."""
    here = tmp_path / "checkout"
    shutil.copytree(checkout_after_make_run, here, symlinks=True)
    env = {"CULTURELENS_BACKBONES": str(backbones_file), "CULTURELENS_CUBE_SOURCE": str(cube_file),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if block.lang == "bash":
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=here, env={**os.environ, **env},
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{block.id}:\n{block.code}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    else:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(here)
        exec(compile(block.code, block.id, "exec"), {"__name__": "__main__"})


@pytest.mark.slow  # one build of the whole site: ~15 s
def test_docs_site_builds_in_strict_mode_with_the_generated_references(tmp_path):
    """`mkdocs build --strict`: no broken link, no page missing from the nav, every snippet and docstring reference
    resolved; the API page holds `culturelens.score`'s docstring and the CLI page every verb's --help."""
    from culturelens.cli import parser

    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "Score a submission folder or" in api and "What <code>culturelens.score</code> returns" in api
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    verbs = [a for a in parser()._actions if a.dest == "verb"][0].choices
    assert all(f'id="culturelens-{verb}"' in cli for verb in verbs), [v for v in verbs if f'-{v}"' not in cli]
    # The README's command blocks, shown in the manual by snippet, are there as the README writes them.
    suite = (site / "suite" / "index.html").read_text(encoding="utf-8")
    assert "every image of every part (19,773), resumable" in suite and "the suite repo + one Hub dataset" in suite


@pytest.mark.slow  # one build of a copy of the site: ~20 s
def test_docs_site_build_fails_on_a_broken_link(tmp_path):
    """Strict mode is what guards the manual: the same configuration, in a copy of the checkout whose docs/ has one
    link to a page that does not exist, fails the build, naming the link."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("docs", ".git", ".venv", "build"):
            (checkout / entry.name).symlink_to(entry)
    shutil.copytree(ROOT / "docs", checkout / "docs")
    with (checkout / "docs" / "index.md").open("a", encoding="utf-8") as page:
        page.write("\nSee [the missing page](no-such-page.md).\n")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=checkout, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode != 0
    assert "contains a link 'no-such-page.md', but the target is not found" in done.stderr, done.stderr[-3000:]
