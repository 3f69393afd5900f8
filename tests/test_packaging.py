"""The wheel is the product: `pip install culturelens` must work without the repository beside it.

Builds the wheel from this checkout, installs it (no dependencies: those come from the test environment through
a path file, so nothing is downloaded) into a fresh virtual environment, and runs `culturelens data build cube-1k`
from a folder outside the checkout, where only the installed package can be imported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import datasets
import pytest

pytestmark = pytest.mark.slow  # builds and installs the wheel in a fresh environment

ROOT = Path(__file__).resolve().parents[1]
CARDS = sorted(p.name for p in (ROOT / "data_cards").glob("*.md"))
SOURCES = ["pyproject.toml", "README.md", "benchmark", "leaderboard", "culturelens", "data_cards"]  # what the wheel is built from


def _run(*argv, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_the_installed_wheel_builds_a_dataset_with_its_card(tmp_path, tiny_upstream):
    # Built from a copy: setuptools writes build/ beside the sources, and a stale one would leak into wheels.
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    _run(sys.executable, "-m", "pip", "wheel", source, "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist",
         cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("culturelens-*.whl"))
    shipped = zipfile.ZipFile(wheel).namelist()
    assert CARDS and all(f"data_cards/{name}" in shipped for name in CARDS)  # every card template ships

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel, cwd=tmp_path)
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).stdout
    # The dependencies, not the checkout: a plain path line (the test environment's editable-install hook, a
    # .pth file of its own, is not run from there).
    (Path(site.strip()) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    where = _run(python, "-c", "import benchmark, data_cards; print(benchmark.__file__, data_cards.__file__)",
                 cwd=tmp_path, env=env).stdout
    assert str(ROOT) not in where and str(venv) in where  # the installed copy, not this checkout
    out = tmp_path / "cube-1k"
    _run(venv / "bin" / "culturelens", "data", "build", "cube-1k", "--source", tiny_upstream, "--out", out,
         cwd=tmp_path, env=env)
    card = (out / "README.md").read_text()
    assert "CUBE" in card and "license: cc-by-nc-sa-4.0" in card  # the builder's licence, in the card
    prompts = datasets.load_dataset(str(out), "cube_1k", split="test")
    assert len(prompts) > 0 and "prompt_id" in prompts.column_names
