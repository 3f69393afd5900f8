"""`culturelens reproduce`: a scored row re-derived from its run.json, on a real store scored by the real worker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import culturelens

# slow: each test scores a submission with the tiny backbones and reproduces it (6 to 30 s)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]


@pytest.fixture(scope="module")
def scored(tmp_path_factory, tiny_upstream, backbones_file) -> tuple[Path, str]:
    """A store holding one submission scored by `culturelens worker` (awareness track, tiny CLIP): (store, id)."""
    from benchmark.datasets import cube_1k
    from leaderboard.store import Store
    from tests.helpers import serving_tiny_cube
    from culturelens.testing.submissions import make_submission

    root = tmp_path_factory.mktemp("reproduce")
    store = serving_tiny_cube(Store(root / "store"), tiny_upstream)
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    outcome = store.submit(make_submission(root / "sub", ids), "tester")
    assert outcome.job is not None, outcome.report.text()
    worker = culturelens("worker", "--store", str(store.root), "--once", "--backbones", str(backbones_file),
                         "--batch-size", "4", "--tracks", "awareness")
    assert worker.returncode == 0, worker.stderr
    assert store.queue.get(outcome.job.id).state == "FINISHED"
    return store.root, outcome.job.id


def copy_of(store: Path, tmp_path: Path) -> Path:
    """A copy of the scored store that a test may damage without touching the others'."""
    return Path(shutil.copytree(store, tmp_path / "store"))


def metric_lines(stdout: str) -> dict[str, list[str]]:
    """The comparison table: metric -> [per-image difference, aggregate difference, equal]."""
    rows = [line.split() for line in stdout.splitlines()]
    start = next(i for i, row in enumerate(rows) if row[:1] == ["metric"])
    return {row[0]: row[1:] for row in rows[start + 1:] if len(row) == 4}


def test_the_run_record_carries_what_reproduction_needs(scored, tiny_clip):
    store, submission_id = scored
    run = json.loads((store / "results" / submission_id / "run.json").read_text())
    assert run["settings"]["tracks"] == ["awareness"]
    assert run["settings"]["metric_settings"]["clip_backbone"] == "clip-vit-b-32"
    assert run["settings"]["metric_settings"]["tau_patch"] == 0.6
    assert run["backbone_specs"] == {"clip-vit-b-32": tiny_clip.to_dict()}
    assert run["batch_size"] == 4 and run["seeds"] == [0, 1]
    assert run["dataset"].startswith("culturelens/cube-1k:cube_1k:test@")


def test_reproducing_a_scored_row_reports_no_difference(scored):
    store, submission_id = scored
    result = culturelens("reproduce", submission_id, "--store", str(store))
    assert result.returncode == 0, result.stderr
    lines = metric_lines(result.stdout)
    assert {"clip_cosine", "clip_score"} <= set(lines)
    assert all(line == ["0", "0", "yes"] for line in lines.values()), result.stdout
    assert "every metric reproduced within 0" in result.stdout


def test_a_tampered_value_is_reported_with_its_exact_difference(scored, tmp_path):
    store = copy_of(scored[0], tmp_path)
    folder = store / "results" / scored[1]
    table = pq.read_table(folder / "per_image.parquet")
    values = table.column("value").to_pylist()
    row = table.column("metric").to_pylist().index("clip_score")
    delta, original = 0.25, values[row]
    values[row] = original + delta
    pq.write_table(table.set_column(table.schema.get_field_index("value"), "value",
                                    pa.array(values, pa.float64())), folder / "per_image.parquet")

    result = culturelens("reproduce", str(folder))
    assert result.returncode == 1, result.stderr
    lines = metric_lines(result.stdout)
    per_image, aggregate, equal = lines["clip_score"]
    assert per_image == f"{abs((original + delta) - original):.6g}" == f"{delta:g}" and equal == "NO"
    assert float(aggregate) == 0  # the stored aggregates were not tampered with, and the rescore reproduces them
    assert lines["clip_cosine"] == ["0", "0", "yes"]
    assert "1 of" in result.stdout and "metrics differ by more than 0" in result.stdout
    # a tolerance above the tampering accepts it
    assert culturelens("reproduce", str(folder), "--tolerance", "0.5").returncode == 0


def test_a_result_without_recorded_settings_is_refused(scored, tmp_path):
    store = copy_of(scored[0], tmp_path)
    run_file = store / "results" / scored[1] / "run.json"
    run = json.loads(run_file.read_text())
    for key in ("settings", "backbone_specs", "batch_size", "dataset_digest"):  # what older results lack
        del run[key]
    run_file.write_text(json.dumps(run))
    result = culturelens("reproduce", scored[1], "--store", str(store))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {run_file} does not record settings, backbone_specs, batch_size, dataset_digest: it was written "
        "before results "
        "recorded their scoring settings, so rescore the submission to make it reproducible")


def test_a_changed_dataset_is_refused(scored, tmp_path):
    """Rebuilt with one prompt reworded (same prompt ids): the datasets fingerprint stays, the rows' digest does not."""
    from tests.helpers import tiny_cube
    from culturelens.testing.submissions import TINY_UPSTREAM

    store = copy_of(scored[0], tmp_path)
    upstream = [dict(record) for record in TINY_UPSTREAM]
    upstream[0]["prompt"] = upstream[0]["prompt"].replace("realistic", "photorealistic")
    (tmp_path / "reworded.json").write_text(json.dumps(upstream), encoding="utf-8")
    tiny_cube(store / "datasets", tmp_path / "reworded.json")
    result = culturelens("reproduce", scored[1], "--store", str(store))
    assert result.returncode == 2
    assert result.stderr.startswith("error: the dataset changed since the result was scored: it was "
                                    "culturelens/cube-1k:cube_1k:test@"), result.stderr


def test_other_weights_for_a_recorded_backbone_are_refused(scored, tmp_path, tiny_clip):
    store, submission_id = scored
    other = tmp_path / "other-clip.safetensors"
    shutil.copyfile(tiny_clip.weights, other)
    backbones = tmp_path / "backbones.json"
    backbones.write_text(json.dumps({"clip-vit-b-32": {**tiny_clip.to_dict(), "weights": str(other)}}))
    result = culturelens("reproduce", submission_id, "--store", str(store), "--backbones", str(backbones))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: the backbones file points clip-vit-b-32 at open_clip:{tiny_clip.model}:other-clip.safetensors, "
        f"but the result was scored with {tiny_clip.uid}")


def test_reproducing_a_score_output(tmp_path, tiny_upstream, backbones_file):
    """`culturelens score --out OUT` then `reproduce OUT/results/ID` (the submission found in OUT/submission)."""
    from benchmark.datasets import cube_1k
    from benchmark.datasets.prompts import load_prompts
    from tests.helpers import tiny_cube
    from culturelens.testing.submissions import make_submission

    store = tmp_path / "store"
    tiny_cube(store / "datasets", tiny_upstream)
    ids = list(load_prompts(cube_1k.HUB_REPO, cube_1k.CONFIG, local_root=store / "datasets").table.index)
    out = tmp_path / "out"
    scored = culturelens("score", str(make_submission(tmp_path / "sub", ids)), "--out", str(out), "--store",
                         str(store), "--backbones", str(backbones_file), "--tracks", "awareness")
    assert scored.returncode == 0, scored.stderr
    (folder,) = (out / "results").iterdir()
    result = culturelens("reproduce", str(folder), "--store", str(store), "--use-cache")
    assert result.returncode == 0, result.stderr
    assert "with the stored embedding cache" in result.stdout
    assert all(line == ["0", "0", "yes"] for line in metric_lines(result.stdout).values()), result.stdout


def test_a_row_on_one_side_only_is_reported_missing_even_where_its_recorded_value_was_null(tmp_path):
    """The recorded result has a VR row whose value is null (no image recognised); the rescore has no such row.
    Two nulls would compare equal, but a row that is not there is missing: 'missing', NO, exit 1."""
    from benchmark import reproduce, results
    from benchmark.run_record import RunRecord

    def tables(name: str, aggregates: list[dict]) -> dict:
        per_image = [{"metric": "crt", "prompt_id": "p1", "seed": 0, "image_sha256": "a", "value": 0.5}]
        return reproduce.read_result(results.write_folder(tmp_path / name, per_image, aggregates, [], RunRecord()))

    crt = {"metric": "crt", "slice": "overall", "slice_value": "all", "value": 0.5}
    vr = {"metric": "vr", "slice": "overall", "slice_value": "all", "value": None}
    differences = reproduce.compare(tables("recorded", [crt, vr]), tables("reproduced", [crt]))
    by_metric = {d.metric: d for d in differences}
    assert by_metric["vr"].aggregate_missing == 1 and by_metric["vr"].aggregate is None
    assert by_metric["crt"] == reproduce.Difference("crt", 0.0, 0.0, 0, 0)
    text = reproduce.report(differences, 0.0)
    assert metric_lines(text)["vr"] == ["-", "missing", "NO"] and metric_lines(text)["crt"] == ["0", "0", "yes"]
    assert text.splitlines()[-1] == ("1 of 2 metrics differ by more than 0; 1 row(s) are on one side only "
                                     "(missing)")


def test_a_rescore_with_no_rows_reports_every_recorded_row_missing(tmp_path):
    """A rescore that wrote no row (nothing could be scored) against a recorded result of two metrics: each metric's
    rows are on one side only, reported missing, exit 1; two results with no rows have nothing to compare."""
    from benchmark import reproduce, results
    from benchmark.run_record import RunRecord

    per_image = [{"metric": m, "prompt_id": "p1", "seed": 0, "image_sha256": "a", "value": 0.5} for m in ("crt", "vr")]
    aggregates = [{"metric": m, "slice": "overall", "slice_value": "all", "value": 0.5} for m in ("crt", "vr")]
    recorded = reproduce.read_result(results.write_folder(tmp_path / "recorded", per_image, aggregates, [],
                                                          RunRecord()))
    empty = reproduce.read_result(results.write_folder(tmp_path / "reproduced", [], [], [], RunRecord()))
    differences = reproduce.compare(recorded, empty)
    assert differences == [reproduce.Difference(m, None, None, 1, 1) for m in ("crt", "vr")]
    assert reproduce.report(differences, 0.0).splitlines()[-1] == (
        "2 of 2 metrics differ by more than 0; 4 row(s) are on one side only (missing)")
    again = results.write_folder(tmp_path / "again", [], [], [], RunRecord())
    assert reproduce.compare(empty, reproduce.read_result(again)) == []
