"""The Python API (`culturelens.score`, `culturelens.metrics`): as `culturelens score` scores, value for value, on a
submission and on plain images and prompts, with clear errors for bad input and the README's example run as
written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import culturelens
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import load_prompts
from benchmark.errors import CultureLensError, OutputExists
from benchmark.run_record import RunRecord
from culturelens.testing.submissions import make_submission
from tests.helpers import culturelens_here, tiny_cube

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]
TRACKS = ["awareness", "variability"]


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _leftovers() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("culturelens-score-*")}


@pytest.fixture(scope="module")
def scored(tmp_path_factory, tiny_upstream, backbones_file):
    """A 6-prompt CUBE-format dataset in a store, a submission of 3 seeds a prompt, a W1KP calibration for the tiny
    DINO, and the submission scored by `culturelens score` (awareness and variability, tiny CLIP and DINO), its
    command line parsed and run by the command's own entry point."""
    from benchmark.metrics.variability import Calibration

    root = tmp_path_factory.mktemp("python-api")
    store = root / "store"
    tiny_cube(store / "datasets", tiny_upstream)
    prompts = load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=store / "datasets").table
    submission = make_submission(root / "submission", list(prompts.index), seeds=(0, 1, 2))
    calibration = root / "w1kp.npz"
    Calibration.fit(np.geomspace(1e-3, 1e3, 61), backbone="dinov2-base").save(calibration)
    settings = {"w1kp_calibration": str(calibration), "w1kp_backbone": "dinov2-base"}
    out = root / "cli"
    result = culturelens_here("score", submission, "--out", out, "--store", store, "--backbones", backbones_file,
                              "--device", "cpu", "--batch-size", "4", "--tracks", *TRACKS,
                              "--w1kp-calibration", calibration, "--w1kp-backbone", "dinov2-base")
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = (out / "results").iterdir()
    options = {"store": store, "backbones": backbones_file, "device": "cpu", "batch_size": 4, "tracks": TRACKS,
               "progress": False, **settings}
    return {"submission": submission, "prompts": prompts, "folder": folder, "options": options, "store": store}


@pytest.mark.slow  # scores with the tiny CLIP and DINO (2 to 6 s; the module's fixture ~10 s more)
def test_python_api_score_equals_the_command_line_value_for_value_and_writes_only_what_is_asked(scored, tmp_path):
    folder, store = scored["folder"], scored["store"]
    store_before, temporary_before = _files(store), _leftovers()

    results = culturelens.score(scored["submission"], **scored["options"])

    cli = {name: pd.read_parquet(folder / f"{name}.parquet") for name in ("per_image", "aggregates", "curves")}
    pd.testing.assert_frame_equal(results.per_image, cli["per_image"])
    pd.testing.assert_frame_equal(results.aggregates.drop(columns="scored_at"),  # the time each was scored differs
                                  cli["aggregates"].drop(columns="scored_at"))
    pd.testing.assert_frame_equal(results.curves, cli["curves"])
    # 18 images x 5 awareness metrics HPS v2 aside (no weights here), one W1KP value per prompt, W1KP_k at k = 2, 3
    assert len(results.per_image) == 18 * 5 + 6
    assert sorted(set(results.curves["x"])) == [2.0, 3.0] and set(results.curves["metric"]) == {"w1kp"}
    recorded = RunRecord.parse((folder / "run.json").read_bytes())
    assert results.run.model_copy(update={"scored_at": None}) == recorded.model_copy(update={"scored_at": None})
    assert results.run.submission_id == folder.name and results.folder is None
    assert results.overall.set_index("metric").loc["clip_score", "n"] == 6
    # nothing written but into the temporary folder, which is gone
    assert _files(store) == store_before and _leftovers() == temporary_before

    kept = culturelens.score(scored["submission"], out=tmp_path / "out", **scored["options"])
    assert kept.folder == tmp_path / "out" / "results" / folder.name
    assert sorted(p.name for p in kept.folder.iterdir()) == sorted(p.name for p in folder.iterdir())
    pd.testing.assert_frame_equal(pd.read_parquet(kept.folder / "per_image.parquet"), cli["per_image"])
    assert (tmp_path / "out" / "submission" / "manifest.json").exists() and (tmp_path / "out" / "cache.sqlite").exists()


def _same_as_the_harness(values, expected) -> bool:
    """Whether float32 embeddings' scores agree with the harness's to float32 rounding: the harness embeds the
    images in batches of its own, and oneDNN's kernels for another batch shape may sum in another order (on an AVX2
    CPU the last one or two bits of a cosine differ; on AVX-512 machines they were equal bit for bit)."""
    return np.allclose(np.asarray(values, dtype=float), np.asarray(expected, dtype=float),
                       rtol=4 * np.finfo(np.float32).eps, atol=0)


def _image_of(submission: Path, prompt_id: str, seed: int) -> Image.Image:
    return Image.open(submission / "images" / prompt_id / f"{seed}.png")


@pytest.mark.slow  # scores with the tiny CLIP and DINO (2 to 6 s; the module's fixture ~10 s more)
def test_python_api_metric_callables_on_pil_images_and_tensors_equal_the_harness(scored):
    """CLIPScore and CLIP cosine of the submission's own images, opened with PIL (and as tensors), in an order of
    their own, equal the values the harness gave those images; W1KP of each prompt's three images equals its."""
    import torch

    from culturelens.metrics import CLIPCosine, CLIPScore, W1KP

    submission, prompts = scored["submission"], scored["prompts"]
    harness = pd.read_parquet(scored["folder"] / "per_image.parquet").set_index(["metric", "prompt_id", "seed"])
    harness = harness.sort_index()
    rng = np.random.default_rng(0)
    chosen = [(p, s) for p in prompts.index for s in (0, 1, 2)]
    chosen = [chosen[i] for i in rng.permutation(len(chosen))[:10]]
    images = [_image_of(submission, p, s) for p, s in chosen]
    texts = [prompts.loc[p, "prompt"] for p, _ in chosen]
    keywords = {k: scored["options"][k] for k in ("backbones", "device", "batch_size")}

    for function, name in ((CLIPScore(**keywords), "clip_score"), (CLIPCosine(**keywords), "clip_cosine")):
        expected = np.array([harness.loc[(name, p, s), "value"] for p, s in chosen])
        assert _same_as_the_harness(function(images, texts), expected), name
        tensors = [torch.from_numpy(np.array(image.convert("RGB"))).permute(2, 0, 1) for image in images]
        assert _same_as_the_harness(function(tensors, texts), expected), name
        assert _same_as_the_harness(function(torch.stack(tensors), texts), expected), name  # one (N, C, H, W)
    assert CLIPCosine(**keywords).info.citation == "Radford et al., arXiv:2103.00020"
    assert len(set(harness.xs("clip_cosine")["value"])) == 18  # the values tell the images apart

    w1kp = W1KP(**keywords, w1kp_calibration=scored["options"]["w1kp_calibration"], w1kp_backbone="dinov2-base")
    order = list(reversed(prompts.index))
    rows = w1kp.rows([_image_of(submission, p, s) for p in order for s in (0, 1, 2)],
                     [prompts.loc[p, "prompt"] for p in order for _ in range(3)], seeds=[0, 1, 2] * 6)
    assert rows["input"].tolist() == [0, 3, 6, 9, 12, 15]  # one row per prompt, where it first appears
    expected = np.array([harness.loc[("w1kp", p), "value"].item() for p in order])
    assert np.array_equal(rows["value"].to_numpy(dtype=float), expected)


@pytest.mark.slow  # scores with the tiny CLIP and DINO (2 to 6 s; the module's fixture ~10 s more)
def test_python_api_images_for_a_dataset_s_prompts_are_scored_as_the_same_submission(scored):
    """Images given by prompt id, with the dataset named: written as a submission, validated and scored as the
    folder is: the same values, under the same protocol (only the manifest, and so the submission id, differ)."""
    submission, prompts = scored["submission"], scored["prompts"]
    chosen = [(p, s) for p in prompts.index for s in (0, 1, 2)]
    options = {**scored["options"], "tracks": ["awareness"]}
    given = culturelens.score(images=[_image_of(submission, p, s) for p, s in chosen],
                              prompt_ids=[p for p, _ in chosen], seeds=[s for _, s in chosen],
                              dataset="culturelens/cube-1k:cube_1k", model="Given as a list", **options)
    harness = pd.read_parquet(scored["folder"] / "per_image.parquet")
    awareness = harness[harness["track"] == "awareness"].astype({"seed": int}).reset_index(drop=True)
    columns = ["metric", "prompt_id", "seed", "value"]  # the image files differ (PNGs written anew): not the pixels
    pd.testing.assert_frame_equal(given.per_image[columns], awareness[columns])
    assert set(given.aggregates["model"]) == {"Given as a list"} and given.run.submission_id.startswith("local-")
    cli = pd.read_parquet(scored["folder"] / "aggregates.parquet")
    assert set(given.aggregates["protocol_id"]) == set(cli.loc[cli["track"] == "awareness", "protocol_id"])

    with pytest.raises(CultureLensError, match=r"REJECTED: answered 1 of 6 prompts"):
        culturelens.score(images=[_image_of(submission, chosen[0][0], 0)], prompt_ids=[chosen[0][0]],
                          dataset="culturelens/cube-1k:cube_1k", **options)


@pytest.mark.slow  # scores with the tiny CLIP and DINO (2 to 6 s; the module's fixture ~10 s more)
def test_python_api_own_prompts_form_a_prompt_set_of_their_own(scored):
    """Prompt texts of one's own: rows in the order given, the same protocol whatever the order, the metrics that
    need a dataset's columns skipped with the reason unless a DataFrame gives the columns."""
    submission, prompts = scored["submission"], scored["prompts"]
    options = {**scored["options"], "tracks": ["awareness"]}
    ids = list(prompts.index)
    images = [_image_of(submission, p, 0) for p in ids]
    texts = [prompts.loc[p, "prompt"] for p in ids]

    forward = culturelens.score(images=images, prompts=texts, **options)
    backward = culturelens.score(images=images[::-1], prompts=texts[::-1], **options)
    clip = forward.per_image[forward.per_image["metric"] == "clip_cosine"]
    assert clip["input"].tolist() == list(range(6)) and clip["seed"].tolist() == [0] * 6
    harness = pd.read_parquet(scored["folder"] / "per_image.parquet").set_index(["metric", "prompt_id", "seed"])
    assert _same_as_the_harness(clip["value"], [harness.loc[("clip_cosine", p, 0), "value"] for p in ids])
    back = backward.per_image[backward.per_image["metric"] == "clip_cosine"]
    assert back["value"].tolist() == clip["value"].tolist()[::-1]
    assert set(forward.aggregates["protocol_id"]) == set(backward.aggregates["protocol_id"])
    protocol = json.loads(forward.aggregates["protocol"].iloc[0])
    assert protocol["dataset"] == "ad-hoc/prompts:prompts:test" and protocol["dataset_revision"] == \
        forward.run.dataset_digest
    assert forward.run.skipped["artifact_top1"] == "the dataset has no artifact and concept columns to recognise"
    assert set(forward.per_image["metric"]) == {"clip_cosine", "clip_score"}

    table = prompts.reset_index()[["prompt", "country", "concept", "artifact"]]
    described = culturelens.score(images=images, prompts=table, **options)
    assert {"artifact_top1", "artifact_top5", "country_top1"} <= set(described.per_image["metric"])
    assert set(described.per_image["country"]) == set(prompts["country"])


@pytest.fixture
def image():
    return Image.new("RGB", (8, 8), (200, 30, 30))


@pytest.mark.parametrize("call, kind, message", [
    (lambda img: culturelens.score(), CultureLensError, "give either a submission"),
    (lambda img: culturelens.score("sub", images=[img], prompts=["a"]), CultureLensError, "not both or neither"),
    (lambda img: culturelens.score(images=[img]), CultureLensError, "either their prompts"),
    (lambda img: culturelens.score(images=[img], prompt_ids=["p1"]), CultureLensError, "give dataset='REPO:CONFIG'"),
    (lambda img: culturelens.score(images=[], prompts=[]), ValueError, "images is empty: give at least one image"),
    (lambda img: culturelens.score(images=[img, img], prompts=["a"]), ValueError,
     "2 images but 1 prompts: give one prompt per image"),
    (lambda img: culturelens.score(images=b"\x89PNG", prompts=["a"]), TypeError,
     "images must be a list (one item per image), not bytes: give a PIL image or a path"),
    (lambda img: culturelens.score(images=[img, 5], prompts=["a", "b"]), TypeError,
     "images[1] is a int: give a PIL image, a torch tensor (C, H, W)"),
    (lambda img: culturelens.score(images=[img], prompts=[3]), TypeError, "prompts[0] is a int, not a string"),
    (lambda img: culturelens.score(images=[img], prompts=["  "]), ValueError, "prompts[0] is empty"),
    (lambda img: culturelens.score(images=[np.full((4, 4, 3), 2.0)], prompts=["a"]), ValueError,
     "images[0]: floating-point pixels must lie in [0, 1] (got 2 to 2)"),
    (lambda img: culturelens.score(images=[np.zeros((4, 4, 2), np.uint8)], prompts=["a"]), ValueError,
     "images[0]: an image of shape (4, 4, 2)"),
    (lambda img: culturelens.score(images=["no/such/image.png"], prompts=["a"]), ValueError,
     "images[0]: no file no/such/image.png"),
    (lambda img: culturelens.score(images=[img, img], prompts=["a", "a"], seeds=[0, 0]), ValueError,
     "two images of prompt p-"),
    (lambda img: culturelens.score(images=[img], prompts=["a"], seeds=[-1]), ValueError,
     "seeds[0] is -1: a seed is a whole number"),
    (lambda img: culturelens.score(images=[img], prompts=["a"], tua=0.5), CultureLensError,
     "unknown setting(s) tua; the metric settings are"),
    (lambda img: culturelens.score("no/such/submission"), CultureLensError,
     "no/such/submission: no such submission folder or .zip"),
    (lambda img: culturelens.metrics.CLIPScore()([img], ["a", "b"]), ValueError, "1 images but 2 prompts"),
    (lambda img: culturelens.metrics.CLIPScore(tua=1), CultureLensError, "unknown setting(s) tua"),
])
def test_python_api_bad_input_gets_a_clear_error(image, call, kind, message):
    with pytest.raises(kind) as raised:
        call(image)
    assert isinstance(raised.value, CultureLensError)
    assert message in str(raised.value)


def test_python_api_writes_a_submission_only_into_a_new_folder(image, tmp_path):
    folder = culturelens.write_submission(tmp_path / "sub", [image, image], ["p1", "p1"],
                                          dataset="culturelens/cube-1k:cube_1k", model="Mine")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert sorted(_files(folder / "images")) == ["p1", "p1/0.png", "p1/1.png"]
    assert (manifest["seeds"], manifest["model"]["name"], manifest["dataset"]["config"]) == ([0, 1], "Mine", "cube_1k")
    with pytest.raises(OutputExists, match="is not empty"):
        culturelens.write_submission(folder, [image], ["p2"], dataset="culturelens/cube-1k:cube_1k")
    with pytest.raises(ValueError, match=r"prompt_ids\[0\] is '../up', not a dataset prompt id"):
        culturelens.write_submission(tmp_path / "other", [image], ["../up"], dataset="culturelens/cube-1k:cube_1k")
    assert not (tmp_path / "other").exists() and not (tmp_path / "up").exists()


def test_python_api_import_loads_no_model_library():
    """`import culturelens` and the names it gives load neither torch nor datasets (an app imports them)."""
    code = ("import sys, culturelens; culturelens.score, culturelens.metrics.CLIPScore, culturelens.RunRecord, "
            "culturelens.ScoringOptions, culturelens.write_submission; print(sorted(m for m in ('torch', 'datasets', "
            "'open_clip', 'transformers', 'diffusers') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def readme_python_example() -> str:
    """The first code block of the manual's "Python" page (docs/python.md), as written."""
    text = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


@pytest.mark.slow
def test_python_api_readme_example_runs_as_written(cube_file, tmp_path, monkeypatch):
    """The manual's Python example (docs/python.md), run from the repository as written (its store and the CUBE-1K
    source set by the environment, as a reader's would be): the demo submission's rows, the same rows from its
    images given by prompt id, images with prompts of their own, and one metric as a function, each equal to the
    harness's."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("CULTURELENS_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("CULTURELENS_CUBE_SOURCE", str(cube_file))
    namespace: dict = {}
    exec(compile(readme_python_example(), "docs/python.md", "exec"), namespace)

    results, ranked, mine = namespace["results"], namespace["ranked"], namespace["mine"]
    overall = results.overall.set_index("metric")
    assert overall.loc["clip_score", "n"] == 72 and results.run.dataset.startswith(
        "culturelens/cube-1k:cube_1k_demo:test@")
    columns = ["metric", "prompt_id", "seed", "value"]
    pd.testing.assert_frame_equal(ranked.per_image[columns], results.per_image[columns])
    assert set(ranked.aggregates["protocol_id"]) == set(results.aggregates["protocol_id"])
    cosine = mine.per_image[mine.per_image["metric"] == "clip_cosine"]
    assert cosine["input"].tolist() == [0, 1, 2, 3]
    assert np.array_equal(namespace["clip_cosine"](namespace["images"][:4], namespace["prompts"]),
                          cosine["value"].to_numpy())


# --- issue 50, finding 10: what a researcher reading the README's "Python" section meets next ---------------------
@pytest.mark.slow  # scores with the tiny CLIP (2 to 6 s; the module's fixture ~10 s more)
def test_no_dead_end_one_image_and_one_prompt_are_a_list_of_one(scored):
    """One PIL image with one prompt string, to a metric and to `culturelens.score`: the value the lists of one
    give, not a TypeError asking for a list."""
    from culturelens.metrics import CLIPCosine

    submission, prompts = scored["submission"], scored["prompts"]
    prompt_id = prompts.index[0]
    image, text = _image_of(submission, prompt_id, 0), prompts.loc[prompt_id, "prompt"]
    keywords = {k: scored["options"][k] for k in ("backbones", "device", "batch_size")}
    clip_cosine = CLIPCosine(**keywords)

    one = clip_cosine(image, text)
    assert one.shape == (1,) and one.tolist() == clip_cosine([image], [text]).tolist()
    harness = pd.read_parquet(scored["folder"] / "per_image.parquet").set_index(["metric", "prompt_id", "seed"])
    # a batch of one image, not the harness's four: equal to float32's precision
    assert one[0] == pytest.approx(harness.loc[("clip_cosine", prompt_id, 0), "value"], rel=1e-6)
    mine = culturelens.score(images=image, prompts=text, **{**scored["options"], "tracks": ["awareness"]})
    assert mine.per_image.set_index("metric").loc["clip_cosine", "value"] == one[0]


@pytest.mark.slow  # loads the tiny CLIP and scores one submission on the command line (~5 s)
def test_no_dead_end_a_metric_that_cannot_run_is_one_type_naming_the_callers_keyword(scored, image, tmp_path):
    """W1KP without a calibration, HPS v2 without its weights and a track that cannot run: each raises
    `culturelens.MetricUnavailable` (the class `culturelens.metrics` gives too), naming the keyword a Python caller
    passes (`w1kp_calibration=`, `backbones=`), not a flag; the command line names the flag for the same cause."""
    from culturelens.metrics import W1KP, HPSv2, MetricUnavailable

    assert MetricUnavailable is culturelens.MetricUnavailable
    backbones = scored["options"]["backbones"]
    with pytest.raises(culturelens.MetricUnavailable) as w1kp:
        W1KP(backbones=backbones)([image, image], ["a", "a"])
    assert "w1kp cannot run: no W1KP calibration: pass w1kp_calibration=PATH_OR_URL or set " \
           "CULTURELENS_W1KP_CALIBRATION" in str(w1kp.value) and "--" not in str(w1kp.value)
    with pytest.raises(culturelens.MetricUnavailable) as hps:
        HPSv2(backbones=backbones)([image], ["a"])
    assert "hps_v2 cannot run: " in str(hps.value) and "backbones=FILE or $CULTURELENS_BACKBONES" in str(hps.value)
    assert "--backbones" not in str(hps.value)
    with pytest.raises(culturelens.MetricUnavailable) as track:
        culturelens.score(images=[image, image], prompts=["a", "a"], tracks=["variability"], backbones=backbones,
                          device="cpu", progress=False)
    assert "no metric of track 'variability' can run: w1kp: no W1KP calibration: pass w1kp_calibration=" \
        in str(track.value)
    with pytest.raises(culturelens.MetricUnavailable) as submission:
        culturelens.score(scored["submission"], store=scored["store"], tracks=["variability"], backbones=backbones,
                          device="cpu", progress=False)
    assert "pass w1kp_calibration=PATH_OR_URL" in str(submission.value)

    cli = culturelens_here("score", scored["submission"], "--out", tmp_path / "out", "--store", scored["store"],
                           "--backbones", backbones, "--device", "cpu", "--tracks", "variability")
    assert cli.returncode == 2
    assert "error: no metric of track 'variability' can run: w1kp: no W1KP calibration: pass --w1kp-calibration " \
           "PATH_OR_URL or set CULTURELENS_W1KP_CALIBRATION" in cli.stderr


def test_no_dead_end_an_unknown_track_is_refused_when_the_metric_is_made():
    """`Metric("clip_score", track="no_such")` is refused on that line, naming the tracks that have metrics, not at
    the first call after images were gathered."""
    from culturelens.metrics import Metric

    with pytest.raises(CultureLensError) as refused:
        Metric("clip_score", track="no_such")
    assert str(refused.value).startswith("Metric('clip_score', track='no_such'): no track 'no_such'; the tracks "
                                         "with metrics are awareness, ")
    assert "variability" in str(refused.value)


@pytest.mark.slow  # builds CUBE-1K from the authors' file and scores its 72 demo images with the tiny CLIP (~15 s)
def test_no_dead_end_python_api_leaves_nothing_in_the_working_directory(cube_file, backbones_file, tmp_path,
                                                                         monkeypatch):
    """The README's first call, `culturelens.score("submissions/example", ...)`, from a folder of one's own with no
    store named: scored, and the folder holds afterwards exactly what it held before (no `.culturelens/`: the
    default dataset is built in the temporary folder that goes at the end); a store named is used and filled as
    the command line fills it."""
    work = tmp_path / "notebook"
    work.mkdir()
    (work / "analysis.ipynb").write_text("{}")
    monkeypatch.chdir(work)
    monkeypatch.delenv("CULTURELENS_STORE", raising=False)
    monkeypatch.setenv("CULTURELENS_CUBE_SOURCE", str(cube_file))

    results = culturelens.score(ROOT / "submissions" / "example", tracks=["awareness"], backbones=backbones_file,
                                progress=False)
    assert results.overall.set_index("metric").loc["clip_score", "n"] == 72
    assert _files(work) == {"analysis.ipynb"}

    again = culturelens.score(ROOT / "submissions" / "example", tracks=["awareness"], backbones=backbones_file,
                              store=tmp_path / "mine", progress=False)
    assert (tmp_path / "mine" / "datasets" / "culturelens__cube-1k" / "README.md").is_file()
    pd.testing.assert_frame_equal(again.per_image, results.per_image)
    assert _files(work) == {"analysis.ipynb"}
