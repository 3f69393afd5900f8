"""No dead end on the command line (issue 50, findings 1, 2, 8 and 9's command-line parts): each test does what a
first submitter or an operator did, the command as the README writes it where it writes one, and checks what they
see next: a command leaves no state that breaks the next one (a default build gives way to the suite served), a wait
says what it waits on and what ends it, a refusal names what to do next for the folder given (did you mean, which
prompts it was checked against, which weights or judge a track lacks), a part never checked is not called OK, and
Ctrl-C is one line saying how to go on."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from benchmark.datasets.prompts import load_prompts, local_folder
from culturelens.testing.submissions import make_submission
from tests.helpers import (culturelens, culturelens_command, culturelens_here, readme_commands, serving, tiny_cube,
                           until)
from tests.suite_stand_ins import CSPACE_RECORDS, SIZE, write_backbones, write_part

ROOT = Path(__file__).resolve().parents[1]
BUILDER = "### A model builder: one generate, one submit"
FIVE_MINUTES = ("## Five minutes to a scored demo row", "docs/getting-started.md")


def tiny_prompts(datasets: Path) -> list[str]:
    return list(load_prompts("culturelens/cube-1k", "cube_1k", local_root=datasets).table.index)


def suite_submission(folder: Path, suite_folder: Path, suite, parts: tuple[str, ...], **overrides) -> Path:
    """A suite submission of ``parts`` for the suite folder ``suite_folder``, as `generate --suite` lays it out."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    (folder.parent / "datasets").symlink_to(suite_folder / "datasets")  # where write_part reads the prompts
    for part in parts:
        write_part(folder, suite, part, **overrides.get(part, {}))
    (folder.parent / "datasets").unlink()
    return folder


# --- 1: the README's generate leaves nothing in the way ---------------------------------------------------------
def test_no_dead_end_generate_suite_with_no_suite_anywhere_writes_nothing_and_names_the_way(tmp_path, monkeypatch):
    (generate, _submit) = readme_commands(BUILDER)
    monkeypatch.chdir(tmp_path)  # a fresh folder, offline (the tests' HF_HUB_OFFLINE)
    result = culturelens_here(*generate[1:], "--model", tmp_path / "pipeline", *SIZE)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "error: cannot generate parts iconic-references, culturalframes of CultureLens suite v1: neither "
        ".culturelens/datasets nor the Hub holds their datasets; build the suite where the public sources answer "
        "(`culturelens suite build --out suite/`) and generate from that folder (`--suite suite/`), or generate the "
        "other parts alone (`--parts cube-1k cube-diversity`). Nothing was written.")
    assert list(tmp_path.iterdir()) == []  # no CUBE-1K built into the default store, no submission folder


def test_no_dead_end_generate_from_a_suite_folder_missing_parts_names_the_build_and_its_weights(small_suite, tmp_path):
    folder, _ = small_suite  # cube-1k and cube-diversity only
    result = culturelens_here("generate", "--suite", folder, "--preset", "sdxl", "--out", tmp_path / "subs" / "m1",
                              "--model", tmp_path / "pipeline", *SIZE)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"error: cannot generate parts iconic-references, culturalframes of CultureLens suite v1, unpinned build: "
        f"{folder} holds no dataset for them (not built there); build them there: `culturelens suite build --out "
        f"{folder} --only iconic-references culturalframes` (it needs the weights of clip-vit-b-32: where the Hub "
        "cannot be reached, add `--backbones FILE` naming local copies), or generate the other parts alone "
        "(`--parts cube-1k cube-diversity`). Nothing was written.")
    assert not (tmp_path / "subs").exists()


def test_no_dead_end_the_stores_default_cube_1k_gives_way_to_the_suite_served(cube_file, small_suite, tmp_path):
    folder, suite = small_suite
    store = tmp_path / "store"
    # The five-minute path first: `validate` builds the default CUBE-1K (the package's pinned rows) into the store.
    validate = next(c for c in readme_commands(*FIVE_MINUTES) if c[1] == "validate")
    checked = culturelens(*validate[1:], "--store", store, "--cube-source", cube_file, cwd=ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    default = local_folder(store / "datasets", "culturelens/cube-1k")
    assert default.is_dir() and not default.is_symlink()
    # Then a submission generated for a suite folder whose CUBE-1K rows are its own (an unpinned build).
    submission = suite_submission(tmp_path / "subs" / "m1", folder, suite, ("cube-1k", "cube-diversity"))
    sent = culturelens_here("submit", submission, "--store", store, "--suite", folder)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert sent.stdout.splitlines()[0].startswith("OK: Tiny Test Model: 2 of 4 parts")
    assert re.search(r"^queued as \S+$", sent.stdout, re.M)
    assert (f"serving culturelens/cube-1k (part cube-1k) from {folder / 'datasets' / 'culturelens__cube-1k'}, in "
            "place of the store's default build") in sent.stderr
    assert default.resolve() == (folder / "datasets" / "culturelens__cube-1k").resolve()


# --- 2: every wait says what it waits on; every refusal what to do next -----------------------------------------
def test_no_dead_end_submit_wait_says_no_worker_serves_the_store_and_gives_up_naming_it(tmp_path, tiny_upstream):
    store = tmp_path / "store"
    submission = make_submission(tmp_path / "subs" / "m1", tiny_prompts(tiny_cube(store / "datasets", tiny_upstream)))
    (_generate, submit) = readme_commands(BUILDER)
    result = culturelens_here(*submit[1:2], submission, *submit[3:], "--store", store, "--timeout", "1")
    assert result.returncode == 2
    job = re.search(r"^queued as (\S+)$", result.stdout, re.M).group(1)
    start = f"`culturelens worker --store {store}` (or `culturelens serve --store {store}`, which runs one)"
    assert result.stdout.splitlines()[-2:] == [
        f"waiting until a worker of the store {store} has scored {job} (at most 1 s: --timeout; Ctrl-C stops "
        "waiting, the submission stays queued)",
        f"no worker serves the store {store}: it waits as PENDING until one starts: {start}"]
    assert result.stderr.splitlines()[-1] == (f"error: submission {job} was not scored within 1 s; it stays queued on "
                                              f"the store {store}: {start} scores it (see its state in the app's "
                                              "Queue tab)")
    # A worker of that store heard from (its heartbeat, as `culturelens worker` records it): the wait says so.
    from leaderboard.store import Store

    Store(store).queue.set_worker("worker-1", "idle", "scores awareness")
    again = make_submission(tmp_path / "subs" / "m2", tiny_prompts(store / "datasets"), model_name="Another Model",
                            model={"name": "Another Model", "id": "local/another", "revision": None, "type": "open"})
    result = culturelens_here("submit", again, "--wait", "--store", store, "--timeout", "1")
    second = re.search(r"^queued as (\S+)$", result.stdout, re.M).group(1)
    assert result.stdout.splitlines()[-1] == f"{second}: PENDING, a worker of {store} takes it next"


def test_no_dead_end_generate_prints_the_submit_command_with_the_store_it_read(tmp_path, monkeypatch):
    import argparse

    from culturelens.verbs.submissions import next_command

    monkeypatch.delenv("CULTURELENS_STORE", raising=False)
    made = argparse.Namespace(out="subs/m1", suite=None, store=None)
    assert next_command(made) == "culturelens submit subs/m1 --store .culturelens --wait"
    assert next_command(argparse.Namespace(out="subs/m1", suite=None, store=str(tmp_path / "srv"))) == \
        f"culturelens submit subs/m1 --store {tmp_path / 'srv'} --wait"
    monkeypatch.setenv("CULTURELENS_STORE", str(tmp_path / "env-store"))  # the variable names the store as well
    assert next_command(made) == f"culturelens submit subs/m1 --store {tmp_path / 'env-store'} --wait"


def test_no_dead_end_validate_on_another_stores_prompts_names_them_and_how_to_name_the_right_one(
        cube_file, tmp_path, tiny_upstream, monkeypatch):
    served = tiny_cube(tmp_path / "served" / "datasets", tiny_upstream).parent  # the store `serve` ran on
    prompts = tiny_prompts(served / "datasets")
    home = tmp_path / "home"
    submission = make_submission(home / "subs" / "m1", prompts)
    monkeypatch.chdir(home)
    monkeypatch.setenv("CULTURELENS_CUBE_SOURCE", str(cube_file))  # the default store builds the real CUBE-1K
    result = culturelens_here("validate", "subs/m1")
    assert result.returncode == 1
    real = len(load_prompts("culturelens/cube-1k", "cube_1k", local_root=home / ".culturelens" / "datasets"))
    shared = len(set(prompts) & set(tiny_prompts(home / ".culturelens" / "datasets")))
    assert result.stdout.splitlines()[0].startswith(f"REJECTED: answered {shared} of {real:,} prompts")
    assert result.stdout.splitlines()[-1] == (
        f"checked against the prompts the store .culturelens holds (culturelens/cube-1k (cube_1k, test), {real:,} "
        "prompts); made for another store's or suite's prompts? `culturelens validate subs/m1 --store DIR` checks it "
        "against the store `culturelens serve` runs on, `--suite DIR` against a suite folder (the one `generate "
        "--suite DIR` read)")
    followed = culturelens_here("validate", "subs/m1", "--store", served)
    assert followed.returncode == 0 and followed.stdout.startswith(f"OK: Tiny Test Model: {len(prompts) * 2} images")
    assert submission.is_dir()


# --- 8: parts never checked, tracks without a judge, assets without weights -------------------------------------
def test_no_dead_end_a_part_never_checked_is_not_called_ok(small_suite, tmp_path):
    folder, suite = small_suite
    submission = suite_submission(tmp_path / "subs" / "m1", folder, suite, ("cube-1k", "cube-diversity"),
                                  **{"cube-diversity": {"seeds": (0, 1)}})  # the part's seeds are 0-2
    result = culturelens_here("validate", submission, "--suite", folder)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[1] == ("  part cube-1k: not checked (its manifest and files are laid out right; its images are "
                        "checked once cube-diversity is put right)")
    assert lines[2] == "  part cube-diversity: REJECTED: 1 problem"
    assert "0 images" not in result.stdout and "OK" not in result.stdout


def test_no_dead_end_suite_status_counts_a_track_without_a_judge_as_off_and_make_run_passes_the_judges(
        built_suite, tmp_path):
    folder = built_suite[0]  # every asset built: only the judges are missing
    result = culturelens_here("suite", "status", folder)
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        f"make run serves the suite in {folder}: 4 of 6 tracks on (awareness, variability, diversity, iconicity)",
        "  relevance is off: its judge Qwen/Qwen2.5-VL-7B-Instruct is not in the Hugging Face cache and the Hub "
        "cannot be reached: `make run RELEVANCE_JUDGE=DIR` (a local copy of the model) or `RELEVANCE_JUDGE=probe` "
        "(the CLIP-probe baseline)",
        "  expectations is off: no VLM judge chosen: `make run EXPECTATIONS_JUDGE=Qwen/Qwen2.5-VL-7B-Instruct` (the "
        "headline protocol's, ~16 GB, downloaded on first use) or a local folder of a model"]
    judge = tmp_path / "my-judge"  # a local copy of a model
    judge.mkdir()
    dry = subprocess.run(["make", "-n", "run", f"SUITE={folder}", f"EXPECTATIONS_JUDGE={judge}",
                          "RELEVANCE_JUDGE=probe"], cwd=ROOT, capture_output=True, text=True).stdout
    lines = dry.replace("\\\n", " ").splitlines()
    commands = [shlex.split(line.lstrip("@")) for line in lines if "culturelens" in line]
    status, serve = commands[-2], commands[-1]
    for command in (status, serve):
        assert command[command.index("--expectations-judge") + 1] == str(judge)
        assert command[command.index("--relevance-judge") + 1] == "probe"
    on = culturelens_here(*status[1:])
    assert on.stdout.splitlines() == [f"make run serves the suite in {folder}: 6 of 6 tracks on (awareness, "
                                      "variability, relevance, diversity, iconicity, expectations)"]


def test_no_dead_end_suite_build_without_weights_names_them_and_the_build_it_names_works(tmp_path, tiny_clip,
                                                                                       tiny_dino):
    cspace = tmp_path / "cube_CSpace.json"
    cspace.write_text(json.dumps(CSPACE_RECORDS))
    out = tmp_path / "suite"
    bare = culturelens_here("suite", "build", "--out", out, "--only", "artifact-index", "--cspace-source", cspace,
                            "--device", "cpu")  # offline, no backbones file: the default weights are not cached
    assert bare.returncode == 1
    refused, said = bare.stdout.splitlines()[:2]
    assert refused.startswith("NOT BUILT artifact-index: needs the weights of clip-vit-b-32: cannot load backbone "
                              "'clip-vit-b-32'") and "Provide backbone" not in refused
    assert said == (f"not built for want of weights (clip-vit-b-32 for artifact-index): where the Hub answers they "
                    "download on first use; offline, write a backbones file naming local copies (docs/scoring.md, "
                    f"\"Backbones\") and build the rest: `culturelens suite build --out {out} --only artifact-index "
                    "--backbones FILE` (with make: `make run BUILD_SUITE=1 CULTURELENS_BACKBONES=FILE`); what was "
                    "built is kept")
    status = culturelens_here("suite", "status", out, "--relevance-judge", "probe", "--expectations-judge", tmp_path)
    assert (f"  diversity is off: no cube-diversity and no artifact-index in {out}: `culturelens suite build --out "
            f"{out} --only cube-diversity artifact-index` (it needs the weights of clip-vit-b-32: where the Hub cannot "
            "be reached, add `--backbones FILE` naming local copies)") in status.stdout.splitlines()
    # the backbones file, as docs/scoring.md "Backbones" shows
    backbones = write_backbones(tmp_path, tiny_clip, tiny_dino)
    command = re.search(r"`(culturelens suite build [^`]+)`", said).group(1).replace("FILE", str(backbones))
    followed = culturelens_here(*shlex.split(command)[1:], "--cspace-source", cspace, "--device", "cpu")
    assert followed.returncode == 0, followed.stdout
    assert followed.stdout.startswith("built artifact-index: ")


# --- 9: smaller dead ends ---------------------------------------------------------------------------------------
def test_no_dead_end_a_folder_above_or_below_a_submission_gets_a_did_you_mean(small_suite, tmp_path, monkeypatch):
    folder, suite = small_suite
    suite_submission(tmp_path / "subs" / "m1", folder, suite, ("cube-1k",))
    monkeypatch.chdir(tmp_path)
    for wrong in ("subs", "subs/m1/parts", "subs/m1/parts/cube-1k/images"):
        result = culturelens_here("validate", wrong, "--suite", folder)
        assert result.returncode == 1
        assert "unexpected file" in result.stdout
        assert result.stdout.splitlines()[-1] == (
            f"{wrong} is no submission folder (one holds manifest.json, or a suite submission's parts/): did you mean "
            "`culturelens validate subs/m1`?")
    meant = culturelens_here("validate", "subs/m1", "--suite", folder)
    assert meant.returncode == 0 and meant.stdout.startswith("OK: Tiny Test Model: 1 of 4 parts")


@pytest.mark.slow
def test_no_dead_end_ctrl_c_during_generate_is_one_line_and_the_same_command_goes_on(small_suite, tiny_sd, tmp_path):
    folder, _ = small_suite
    command = culturelens_command("generate", "--suite", folder, "--parts", "cube-1k", "--preset", "sdxl", "--out",
                                  "subs/m1", "--model", tiny_sd, *SIZE)
    images = tmp_path / "subs" / "m1" / "parts" / "cube-1k" / "images"
    # Ctrl-C as a terminal gives it: the suite run in the background (`make test &`) ignores SIGINT, and a child
    # inherits that (Python then never raises KeyboardInterrupt: the command ran to its end, exit 0).
    running = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "2"},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        until(lambda: images.is_dir() and any(images.rglob("*.png")), 600, "a first image")
        running.send_signal(signal.SIGINT)
        out, err = running.communicate(timeout=120)
    finally:
        running.kill()
    assert running.returncode == 130
    assert "Traceback" not in err
    assert err.splitlines()[-1].split("\r")[-1] == (
        "stopped (Ctrl-C): the images finished so far are kept in subs/m1; run the same command again to go on where "
        "it stopped")
    # On a CPU with two threads, before anything loads: one thread can be faster, and how to ask for it.
    assert re.search(r"^generating on the CPU with 2 threads( \(load [\d.]+ on \d+ cores now\))?: where other work "
                     r"keeps the cores busy, one thread can be many times faster \(about 10x on a busy 2-core "
                     r"machine\); to use one, run the same command with OMP_NUM_THREADS=1 before it$", err, re.M)
    kept = len(list(images.rglob("*.png")))
    again = culturelens(*command[3:], cwd=tmp_path, env={"OMP_NUM_THREADS": "1"}, timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{kept} already done" in again.stdout
    assert "generating on the CPU" not in again.stderr  # one thread: nothing to say


def test_no_dead_end_generate_on_a_gpu_or_one_thread_says_nothing_of_threads():
    from benchmark.generation.command import cpu_threads_hint

    assert cpu_threads_hint("cpu", 2, load=7.7, cores=2) == (
        "generating on the CPU with 2 threads (load 7.7 on 2 cores now): where other work keeps the cores busy, one "
        "thread can be many times faster (about 10x on a busy 2-core machine); to use one, run the same command with "
        "OMP_NUM_THREADS=1 before it")
    assert cpu_threads_hint("cpu", 1, load=7.7, cores=2) is None
    assert cpu_threads_hint("cuda", 16, load=0.1, cores=16) is None


@pytest.mark.slow
def test_no_dead_end_a_fresh_make_run_offline_names_make_runs_own_variable(tmp_path):
    with socket.socket() as closed:  # an address nothing answers: the public URL, offline
        closed.bind(("127.0.0.1", 0))
        source = f"http://127.0.0.1:{closed.getsockname()[1]}/cube_1k.json"
    log = tmp_path / "serve.log"
    with serving(tmp_path / "store", log, "--cube-source", source, "--no-worker"):
        said = next(line for line in log.read_text().splitlines() if "the default dataset is not built" in line)
    assert said.endswith("offline, give a local copy of the authors' cube_1k.json: `culturelens serve --cube-source "
                         "PATH` (CULTURELENS_CUBE_SOURCE; `make run CUBE_SOURCE=PATH`)); the app runs without it")
    assert "Pass --source" not in said
    # `make run` passes that variable on as the flag named.
    dry = subprocess.run(["make", "-n", "run", "CUBE_SOURCE=/data/cube_1k.json"], cwd=ROOT, capture_output=True,
                         text=True).stdout
    assert "--cube-source /data/cube_1k.json" in dry


def test_no_dead_end_the_relevance_off_line_leaves_out_the_knowledge_base_the_suite_holds(tiny_suite, tmp_path):
    from leaderboard.served_suite import open_served
    from leaderboard.store import Store
    from leaderboard.ui.queue import QueueTab
    from leaderboard.ui.site import Site

    folder = tiny_suite[0]  # holds the relevance knowledge base
    store_root = tmp_path / "store"
    served = open_served(str(folder), store_root / "datasets", lambda line: None)
    store = Store(store_root, suite=served.suite)
    # A worker that could not load the relevance judge, as `culturelens worker` records it.
    store.queue.set_worker("worker-1", "idle", "scores awareness")
    store.queue.set_worker_tracks("worker-1", {"awareness": None, "relevance": "cannot load the judge "
                                                                                "Qwen/Qwen2.5-VL-7B-Instruct"})
    shown, _ = QueueTab(Site(store, "ada", suite=served, metric_settings={})).status()
    line = next(line for line in html.unescape(shown).splitlines() if "**Relevance (CAIRE)**" in line)
    assert "cannot load the judge Qwen/Qwen2.5-VL-7B-Instruct" in line
    assert "`--relevance-judge ...`" in line and "--relevance-kb" not in line
