"""Scores no curation can lift (issue 49, findings 1, 4's kinds and 8): each finding reproduced first on hand-made
inputs or a hand-built store whose values are known in advance, then shown fixed through the product's own path:
the harness's rows (``harness.metric_rows``, ``harness.aggregate_scores``), a results folder (``write_folder``), the
``Store``, the ``Catalog`` and the ranked tables (``tables.ranked``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from benchmark import harness, ranking, results
from benchmark.aggregate import aggregate
from benchmark.datasets import iconic_references
from benchmark.metrics import iconicity
from benchmark.metrics.base import Inputs, Metric, MetricInfo, Need
from benchmark.metrics.variability import W1KP, Calibration
from benchmark.run_record import RunRecord
from benchmark.submission.manifest import Manifest
from benchmark.stats import mean_ci
from leaderboard import display, tables
from leaderboard.catalog import Catalog
from leaderboard.store import Store

PAPER = iconicity.VARIANTS["paper"]
CRT_DATASET = f"{iconic_references.HUB_REPO}:{iconic_references.CONFIG}:{iconic_references.SPLIT}"
EYE = np.eye(16, dtype=np.float32)


def drawn(recognised: bool, reused: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One generated image of a still reference whose CLIP embedding is (1, 0) and whose DINO grid is the 16
    one-hot patches: its CLIP embedding (the reference's, cos 1 > 0.7, or orthogonal to it, cos 0) and its grid (the
    reference's first ``reused`` patches, cos 1 > 0.6, then the negatives of the others, whose best cos is 0)."""
    return (np.array([1.0, 0.0] if recognised else [0.0, 1.0], dtype=np.float32),
            np.concatenate([EYE[:reused], -EYE[reused:]]))


# A reference's ten images as an honest model draws them: three recognised, reusing 16, 8 and 0 of their 16 patches
# (VR 1, 0.5, 0), seven not: CRA per image 0.3, VR 0.5, CRT per reference 0.3 x (1 - 0.5) = 0.15.
TEN = [drawn(True, 16), drawn(True, 8), drawn(True, 0)] + [drawn(False)] * 7
LIKED = 2  # the seed of the recognised image that copies nothing: CRT 1 and VR 0 on its own
SEEDS = list(range(10))


def iconicity_inputs(sent: dict[str, dict[int, tuple]], sid: str = "s") -> tuple[Inputs, pd.DataFrame]:
    """The inputs of the iconicity metrics and the harness's base rows for references (prompt_id -> seed -> the
    image sent, a ``drawn`` pair)."""
    rows = [(p, s, image) for p, images in sent.items() for s, image in images.items()]
    frame = pd.DataFrame([(p, s) for p, s, _ in rows], columns=["prompt_id", "seed"]).assign(kind="still")
    features = {Need(PAPER.clip, "image"): np.stack([i[0] for *_, i in rows]),
                Need(PAPER.dino, "grid", 4): np.stack([i[1] for *_, i in rows])}
    references = {Need(PAPER.clip, "image", of="reference"): {p: np.array([[1.0, 0.0]], np.float32) for p in sent},
                  Need(PAPER.dino, "grid", 4, of="reference"): {p: EYE[None] for p in sent}}
    inputs = Inputs(frame, features, {}, references, pd.Series(1, index=list(sent)))
    return inputs, base_rows(frame, sid)


def base_rows(images: pd.DataFrame, sid: str) -> pd.DataFrame:
    """The harness's base rows of image rows (prompt_id, seed and slice columns): image path and sha256, submission
    and model."""
    return images.assign(image_path=images["prompt_id"] + "/" + images["seed"].astype(str) + ".png",
                         image_sha256=sid + images["prompt_id"] + images["seed"].astype(str), submission_id=sid,
                         model=sid)


def manifest(base: pd.DataFrame, seeds: list[int]) -> Manifest:
    """The manifest of a submission declaring ``seeds`` that sent the images of ``base``, listing every other seed
    of the prompts it answered as missing (refused), as validation requires."""
    sent = set(zip(base["prompt_id"], base["seed"]))
    missing = [{"prompt_id": p, "seed": s, "reason": "refused"} for p in base["prompt_id"].unique() for s in seeds
               if (p, s) not in sent]
    return Manifest.model_validate({
        "format_version": 1, "model": {"name": "m", "id": "m", "type": "open"},
        "dataset": {"repo": "tests/prompts", "config": "c", "split": "s"}, "images_per_prompt": len(seeds), "seeds": seeds,
        "license": "unknown", "contact": "unknown", "missing": missing})


def score(metrics: list[Metric], inputs: Inputs, base: pd.DataFrame, seeds: list[int]
          ) -> tuple[pd.DataFrame, list[dict], pd.DataFrame | None]:
    """The harness's per-image rows, aggregate rows and per-prompt curves of a submission declaring ``seeds`` that
    sent the images of ``base`` (``manifest``), by the metrics that apply."""
    metrics = [m for m in metrics if m.applies(inputs) is None]
    missing = harness.missing_images(manifest(base, seeds))
    per_image, curves = harness.metric_rows(metrics, inputs, base, missing)
    return per_image, harness.aggregate_scores(per_image, missing, metrics), curves


def prompt_rows(aggregates: list[dict], metric: str) -> dict[str, list]:
    """The ``prompt`` slice rows of one metric: prompt_id -> [value (None: no value), n, excluded]."""
    return {r["slice_value"]: [r["value"], r["n"], r["excluded"]] for r in aggregates
            if r["metric"] == metric and r["slice"] == "prompt"}


def write(store: Store, sid: str, metrics: list[Metric], per_image: pd.DataFrame, aggregates: list[dict],
          fields: dict) -> None:
    """A results folder as the harness writes it (``harness.score``): the aggregate rows, each metric's derived
    ones, with each metric's declaration (version, direction, range, kind) and the protocol ``fields``."""
    info = {m.info.name: m.info for m in metrics}
    aggregates = aggregates + [row for m in metrics for row in m.derived(aggregates, None)]
    protocol = results.protocol_columns(fields)
    rows = []
    for row in aggregates:
        declared = info.get(row["metric"])
        if declared is not None:
            row = {**row, "metric_version": declared.version, "higher_is_better": declared.higher_is_better,
                   "range_low": declared.low, "range_high": declared.high, "value_kind": declared.kind}
        rows.append({**row, "provenance": "scored", "submission_id": sid, "model": sid,
                     "scored_at": "2026-02-01T00:00:00", **protocol})
    results.write_folder(store.results / sid, results.records(per_image), rows, [], RunRecord(submission_id=sid))


CRT_FIELDS = {"dataset": CRT_DATASET, "dataset_revision": "r1", "images_per_prompt": 10,
              "missing_images": results.MISSING_AS_FAILURES, "metric_version": PAPER.version,
              "backbones": [f"{PAPER.clip}=openai/clip@r1", f"{PAPER.dino}=facebook/dino@r2"]}


def test_curation_keeping_the_liked_image_of_ten_lifts_neither_crt_nor_vr():
    """Finding 1: a submission that declares ten seeds and sends only the one recognised image that copies nothing
    had CRT per reference 1 and VR 0, where its ten images give 0.15 and 0.5. A value per reference now needs every
    declared image: the curated reference is not scored (refused, at the worst), and per image the nine missing
    images count as failures (not recognised, fully reused)."""
    honest, honest_base = iconicity_inputs({"r1": dict(enumerate(TEN))})
    curated, curated_base = iconicity_inputs({"r1": {LIKED: TEN[LIKED]}})
    # The finding: the metrics over the images present.
    for inputs, crt, vr in ((honest, 0.15, 0.5), (curated, 1.0, 0.0)):
        assert iconicity.Transformation().per_prompt(inputs)["value"].tolist() == pytest.approx([crt])
        assert iconicity.VisualReuse().per_prompt(inputs)["value"].tolist() == pytest.approx([vr])

    per_image, aggregates, _ = score(iconicity.metrics(), honest, honest_base, SEEDS)
    assert per_image["error"].isna().all()
    for metric, value in (("crt", 0.15), ("vr", 0.5), ("cra_reference", 1.0), ("cra_image", 0.3),
                          ("vr_image", 0.5)):
        assert prompt_rows(aggregates, metric)["r1"][0] == pytest.approx(value), metric

    per_image, aggregates, _ = score(iconicity.metrics(), curated, curated_base, SEEDS)
    values = per_image[per_image["seed"].isna()].set_index("metric")
    for metric in ("crt", "vr", "cra_reference"):
        assert np.isnan(values.loc[metric, "value"]) and values.loc[metric, "error"] == harness.MISSING_IMAGES
        assert prompt_rows(aggregates, metric)["r1"] == [None, 0, 1]  # not scored: refused
    # Per image, the liked image's own rows, and its prompt's mean over the ten declared: 1 of 10 recognised, and
    # VR (0 + 9 x 1) / 10, where a missing image used to be left out (VR 0).
    assert per_image[per_image["metric"] == "cra_image"]["value"].tolist() == [1.0]
    assert prompt_rows(aggregates, "cra_image")["r1"][0] == pytest.approx(0.1)
    assert prompt_rows(aggregates, "vr_image")["r1"][0] == pytest.approx(0.9)


def test_curation_shows_in_the_refused_column_end_to_end(tmp_path):
    """Finding 1 end to end: an honest model and a curator on twelve references, the curator sending only the liked
    image on six of them. Ranked on what it sent, the curator's CRT per reference was (6 x 1 + 6 x 0.15) / 12 =
    0.575 against 0.15, with nothing refused, under the same protocol id; now each curated reference counts as
    refused, at the worst: CRT (6 x 0 + 6 x 0.15) / 12 = 0.075, VR (6 x 1 + 6 x 0.5) / 12 = 0.75 and CRT from
    the column means 0.5 x (1 - 0.75) = 0.125, refused 50%. Twelve references, so that the table ranks (rank rule 2
    ranks from 10 prompts): the honest model is better on the six curated ones and level on the rest, 6 wins to 0,
    a sign test's p of 2 / 2^6 = 0.031 < 0.05, so it ranks 1 and the curator 2."""
    references = [f"r{i}" for i in range(1, 13)]
    curated_on = {f"r{i}" for i in range(1, 7)}
    store = Store(tmp_path / "store")
    metrics = iconicity.metrics()
    sent = {"curator": {r: {LIKED: TEN[LIKED]} if r in curated_on else dict(enumerate(TEN)) for r in references},
            "honest": {r: dict(enumerate(TEN)) for r in references}}
    for sid, images in sent.items():
        inputs, base = iconicity_inputs(images, sid)
        if sid == "curator":  # the finding: its CRT per reference over the images it sent
            own = iconicity.Transformation().per_prompt(inputs)["value"]
            assert own.mean() == pytest.approx(0.575)
        per_image, aggregates, _ = score(metrics, inputs, base, SEEDS)
        write(store, sid, metrics, per_image, aggregates, CRT_FIELDS)
        if sid == "curator":  # alone, nobody has a value on r1 and r2: they stay in its prompt set all the same
            [row] = tables.ranked(Catalog(store), "iconicity", "crt")[0].itertuples()
            assert (row.value, row.refused, row.n) == (pytest.approx(0.075), 0.5, 12)
    cat = Catalog(store)
    expected = {"crt": {"honest": (0.15, 0.0), "curator": (0.075, 0.5)},
                "vr": {"honest": (0.5, 0.0), "curator": (0.75, 0.5)},
                iconicity.CRT_FROM_MEANS[0]: {"honest": (0.5, 0.0), "curator": (0.125, 0.5)}}
    for metric, by_model in expected.items():
        frame, note = tables.ranked(cat, "iconicity", metric)
        assert frame["protocol_id"].nunique() == 1 and frame["not_ranked"].eq("").all(), metric
        got = {row.model: (row.value, row.refused) for row in frame.itertuples()}
        assert got == {model: pytest.approx(pair) for model, pair in by_model.items()}, metric
        assert list(frame["model"]) == ["honest", "curator"] and list(frame["rank"]) == [1, 2], metric
        assert "1 row left some unanswered" in note
    shown = display.display(tables.ranked(cat, "iconicity", "crt")[0])
    assert list(shown["Refused"]) == ["0%", "50%"]


def test_curation_of_seeds_no_longer_moves_w1kp():
    """Finding 1 on W1KP (F(d) = d / 4): ten images, five at (0, 0) and five at (1, 0), have 25 of 45 pairs at
    squared distance 1 (F = 0.25), W1KP 1 - 25 x 0.25 / 45 = 0.8611; sending two of the alike ones made it 1. The
    prompt is now not scored, its W1KP_k curve left out (it would count in the model's curve and reusability)."""
    calibration = Calibration(np.array([0.0, 4.0]), np.array([0.0, 1.0]), backbone="x")
    features = np.array([[0.0, 0.0]] * 5 + [[1.0, 0.0]] * 5)

    def inputs(prompts: dict[str, list[int]]) -> tuple[Inputs, pd.DataFrame]:
        frame = pd.DataFrame([(p, s) for p, seeds in prompts.items() for s in seeds], columns=["prompt_id", "seed"])
        return Inputs(frame, {Need("x", "image"): features[frame["seed"].to_numpy()]}, {}), base_rows(frame, "s")

    metric = W1KP(calibration, backbone="x")
    honest = inputs({"a": SEEDS, "b": SEEDS})
    curated = inputs({"a": [0, 1], "b": SEEDS})
    assert metric.per_prompt(honest[0])["value"].tolist() == pytest.approx([1 - 25 * 0.25 / 45] * 2)
    assert metric.per_prompt(curated[0])["value"].tolist() == pytest.approx([1.0, 1 - 25 * 0.25 / 45])  # the finding
    per_image, aggregates, curves = score([metric], *curated, SEEDS)
    rows = prompt_rows(aggregates, "w1kp")
    assert rows["a"] == [None, 0, 1] and rows["b"][0] == pytest.approx(1 - 25 * 0.25 / 45)
    assert per_image.set_index("prompt_id").loc["a", "error"] == harness.MISSING_IMAGES
    assert set(curves["prompt_id"]) == {"b"}


class RawDot(Metric):
    """A metric of the tests: each image's first feature, or no value (NaN) where its second is set, declared in
    [0, 1] and never undefined: what a scorer with a bug (values past its range) or a judge whose answer cannot
    be read (none) gives."""

    info = MetricInfo("raw_dot", "first feature", "awareness", "1", True, "share", 0.0, 1.0, "tests",
                      (Need("x", "image"),))

    def per_image(self, inputs: Inputs):
        features = inputs.features[Need("x", "image")].astype(float)
        return np.where(features[:, 1] == 0, features[:, 0], np.nan), [None] * len(inputs.images)


def test_curation_a_value_outside_the_declared_range_is_an_error_row_never_ranked(tmp_path):
    """Finding 8: per-image values past the declared range were averaged as they came. A model whose images score
    1.5 on two of three prompts and 0.5 on the third had a mean of 1.1667, above a perfect model's 1, and ranked
    first. Now such a value is an error row (a value past the range by float rounding, 1 + 1e-9, is its end), a
    prompt with no value left is not scored, and the model's value is (0 + 0 + 0.5) / 3, two thirds refused, shown
    last (three prompts are too few to rank under rank rule 2: values are shown best first, never as an order). A
    NaN where the metric declares no rule for one is an error too."""
    store = Store(tmp_path / "store")
    sent = {"perfect": {"p1": [1.0 + 1e-9, 1.0], "p2": [1.0, 1.0], "p3": [1.0, 1.0]},
            "overflow": {"p1": [1.5, 1.5], "p2": [1.5, 1.5], "p3": [0.5, 0.5]},
            "unreadable": {"p1": [np.nan, np.nan], "p2": [0.25, np.nan], "p3": [0.5, 0.5]}}
    fields = {"dataset": "d:c:s", "dataset_revision": "r1", "images_per_prompt": 2,
              "missing_images": results.MISSING_AS_FAILURES, "metric_version": "1", "backbones": ["x=x@r"]}
    for sid, prompts in sent.items():
        frame = pd.DataFrame([(p, s) for p in prompts for s in (0, 1)], columns=["prompt_id", "seed"])
        value = np.array([v for values in prompts.values() for v in values])
        features = np.stack([np.nan_to_num(value), np.isnan(value)], axis=1)  # finite: the metric gives the NaN
        inputs = Inputs(frame, {Need("x", "image"): features}, {})
        if sid == "overflow":  # the finding: the values as the metric gives them, averaged
            raw = frame.assign(track="awareness", metric="raw_dot", value=RawDot().per_image(inputs)[0])
            assert next(r for r in aggregate(raw) if r["slice"] == "overall")["value"] == pytest.approx(3.5 / 3)
        per_image, aggregates, _ = score([RawDot()], inputs, base_rows(frame, sid), [0, 1])
        write(store, sid, [RawDot()], per_image, aggregates, fields)
        if sid == "perfect":
            assert per_image["value"].tolist() == [1.0] * 6 and per_image["error"].isna().all()
        if sid == "overflow":
            assert per_image["error"].tolist() == ["raw_dot value outside its declared range [0, 1]"] * 4 + [None] * 2
            assert per_image["value"].isna().sum() == 4
            assert prompt_rows(aggregates, "raw_dot")["p1"] == [None, 0, 2]
        if sid == "unreadable":
            assert per_image["error"].tolist() == ["raw_dot gave no value (it has one wherever it applies)"] * 2 + [
                None, "raw_dot gave no value (it has one wherever it applies)", None, None]
            assert prompt_rows(aggregates, "raw_dot")["p2"] == [0.25, 1, 1]
    frame, _ = tables.ranked(Catalog(store), "awareness", "raw_dot")
    got = {row.model: (row.value, row.refused) for row in frame.itertuples()}
    assert got == {"perfect": (1.0, 0.0), "unreadable": (pytest.approx(0.75 / 3), pytest.approx(1 / 3)),
                   "overflow": (pytest.approx(0.5 / 3), pytest.approx(2 / 3))}
    assert list(frame["model"]) == ["perfect", "unreadable", "overflow"] and frame["rank"].isna().all()
    assert frame["not_ranked"].str.startswith("too few prompts to rank (3;").all()


def test_curation_cra_reference_interval_is_a_rate_wilsons_for_0_and_1_of_10(tmp_path):
    """Finding 4 (kinds): CRA per reference is 1 or 0 per reference, an event, but was declared continuous, so 0 of
    10 references showed [0, 0] and 1 of 10 [0, 1]. Declared a rate, its interval is Wilson's with continuity
    correction: [0, 0.3445] and [0.0052, 0.4588] (scipy's ``binomtest``, method "wilsoncc"). Every 0/1 per-prompt
    value is a rate. As a continuous score, ten equal values bound no upper side: "not bounded", infinite."""
    kinds = {m.info.name: m.info.kind for m in iconicity.metrics()}
    assert kinds == {"cra_image": "rate", "cra_reference": "rate", "vr": "continuous", "vr_image": "continuous",
                     "crt": "continuous", "crc": "rate"}
    zeros, one = np.zeros(10), np.eye(10)[0]
    assert mean_ci(zeros, bounds=(0.0, 1.0)) == (0.0, np.inf) and mean_ci(one, bounds=(0.0, 1.0)) == (0.0, np.inf)

    store = Store(tmp_path / "store")
    references = [f"r{i}" for i in range(10)]
    blind = dict(enumerate([drawn(False)] * 10))
    metrics = iconicity.metrics()
    for sid, recognised in (("none", set()), ("once", {"r0"})):
        inputs, base = iconicity_inputs({r: dict(enumerate(TEN)) if r in recognised else blind for r in references},
                                        sid)
        per_image, aggregates, _ = score(metrics, inputs, base, SEEDS)
        write(store, sid, metrics, per_image, aggregates, CRT_FIELDS)
    frame, _ = tables.ranked(Catalog(store), "iconicity", "cra_reference")
    for row in frame.itertuples():
        k = {"none": 0, "once": 1}[row.model]
        wilson = scipy_stats.binomtest(k, 10).proportion_ci(0.95, method="wilsoncc")
        assert (row.value, row.n) == (k / 10, 10)
        assert (row.ci_low, row.ci_high) == pytest.approx((wilson.low, wilson.high), abs=1e-12)
    assert {row.model: round(row.ci_high, 4) for row in frame.itertuples()} == {"none": 0.3445, "once": 0.4588}


def hand_built(store: Store, sid: str, track: str, values: dict[str, dict[str, float]], fields: dict,
               higher_is_better: bool = True) -> None:
    """A results folder of hand-built aggregate rows, as stores written before this issue hold them: per metric,
    its overall mean and one ``prompt`` row per prompt with a value (none for a prompt without one), range [0, 1]."""
    protocol = results.protocol_columns(fields)
    rows = []
    for metric, prompts in values.items():
        common = {"provenance": "scored", "submission_id": sid, "model": sid, "track": track, "metric": metric,
                  "metric_version": fields["metric_version"], "higher_is_better": higher_is_better,
                  "range_low": 0.0, "range_high": 1.0, "scored_at": "2026-02-01T00:00:00", **protocol}
        rows.append({**common, "slice": "overall", "slice_value": "all", "value": float(np.mean(list(prompts.values()))),
                     "n": len(prompts)})
        rows += [{**common, "slice": "prompt", "slice_value": p, "value": v, "n": 2} for p, v in prompts.items()]
    results.write_folder(store.results / sid, [], rows, [], RunRecord(submission_id=sid))


def test_curation_an_undefined_headline_value_on_an_answered_prompt_counts_as_a_failure(tmp_path):
    """Finding 8: a model answered all ten prompts (its rows of another metric of the track are there) but has no
    value of the ranked metric on its two weakest; it was left out of the mean, 0.5625, rank 1 with 0% refused,
    above 0.5 and 0.46875. Nothing says that value is undefined by the metric's own rule, so it now counts as the
    worst: (8 x 0.5625) / 10 = 0.45, 20% refused. Its rank under rank rule 2 is 1 + the models significantly better:
    "steady" (0.5) beats it on 2 prompts and loses 8, which no sign test calls, so it shares rank 1 with "steady";
    "lower" (0.46875) loses all ten prompts to "steady" (p = 2 / 2^10, under 0.05 / 3 pairs): rank 2. A value the
    harness recorded as undefined by the metric's rule (VR of a reference where no image is recognised: a null
    value, nothing excluded) is still left out."""
    store = Store(tmp_path / "store")
    prompts = [f"p{i}" for i in range(10)]
    fields = {"dataset": "d:c:s", "dataset_revision": "r1", "images_per_prompt": 2,
              "missing_images": results.MISSING_AS_FAILURES, "metric_version": "1", "backbones": ["x=x@r"]}
    headline = {"steady": dict.fromkeys(prompts, 0.5), "lower": dict.fromkeys(prompts, 0.46875),
                "gappy": dict.fromkeys(prompts[:8], 0.5625)}
    for sid, values in headline.items():
        hand_built(store, sid, "awareness", {"country_top1": values, "hps_v2": dict.fromkeys(prompts, 0.25)}, fields)
    cat = Catalog(store)
    # The finding, by the rule as it was: answered where any metric of the track has a value, and an answered
    # prompt without one left out.
    rows = cat.track_prompts(list(headline), "awareness")
    values = rows[rows["metric"] == "country_top1"].pivot_table(index="prompt_id", columns="submission_id",
                                                                values="value").reindex(prompts)
    old = ranking.rank([values], ranking.Rule(low=0.0, high=1.0),
                       pd.crosstab(rows["prompt_id"], rows["submission_id"]) > 0, intervals=False).rows
    assert old.loc["gappy", ["score", "rank", "refused"]].tolist() == [0.5625, 1, 0.0]

    frame, _ = tables.ranked(cat, "awareness", "country_top1")
    got = {row.model: (row.rank, row.value, row.refused, row.n) for row in frame.itertuples()}
    assert got == {"steady": (1, 0.5, 0.0, 10), "lower": (2, 0.46875, 0.0, 10), "gappy": (1, 0.45, 0.2, 10)}

    # Undefined by the metric's own rule, as the harness records it: left out, nothing refused.
    references = {f"r{i}": dict(enumerate(TEN)) for i in range(3)} | {"r3": dict(enumerate([drawn(False)] * 10))}
    inputs, base = iconicity_inputs(references, "blind-once")
    per_image, aggregates, _ = score(iconicity.metrics(), inputs, base, SEEDS)
    assert prompt_rows(aggregates, "vr")["r3"] == [None, 0, 0]
    write(store, "blind-once", iconicity.metrics(), per_image, aggregates, CRT_FIELDS)
    frame, _ = tables.ranked(Catalog(store), "iconicity", "vr")
    assert frame[["value", "refused", "n"]].values.tolist() == [[0.5, 0.0, 3]]
    frame, _ = tables.ranked(Catalog(store), "iconicity", "crt")
    assert frame[["value", "refused", "n"]].values.tolist() == [[pytest.approx(0.45 / 4), 0.0, 4]]


def test_curation_a_censored_reusability_ranks_above_a_value_only_where_its_bound_reaches(tmp_path):
    """Finding 8 (censoring): W1KP reusability "> k" (never reached within the k seeds measured) ranked above every
    measured value, so "> 10" ranked above 15 when curves of different lengths shared a protocol. All that is known
    is that it exceeds k: it ranks above a measured v only when k >= v, and nothing is known to be better than it.
    Ranks are 1 + the rows known to be better: "> 20", "> 10" and "> 8" 1; 15 2 (below "> 20" only); 8 5 ("> 8"
    exceeds it, as do the others)."""
    store = Store(tmp_path / "store")
    fields = {"dataset": "d:c:s", "dataset_revision": "r1", "images_per_prompt": 20,
              "missing_images": results.MISSING_AS_FAILURES, "metric_version": "2 (paper; calibration for x)",
              "backbones": ["x=x@r"]}
    reusability = {"above-20": (None, 20.0), "above-10": (None, 10.0), "above-8": (None, 8.0), "fifteen": (15.0, None),
                   "eight": (8.0, None)}
    for sid, (value, bound) in reusability.items():
        row = {"provenance": "scored", "submission_id": sid, "model": sid, "track": "variability",
               "metric": "w1kp_reusability", "slice": "overall", "slice_value": "all", "value": value, "ci_low": bound,
               "ci_high": None, "n": 4, "higher_is_better": True, "metric_version": fields["metric_version"],
               "scored_at": "2026-02-01T00:00:00", **results.protocol_columns(fields)}
        results.write_folder(store.results / sid, [], [row], [], RunRecord(submission_id=sid))
    values = pd.Series({sid: np.inf if value is None else value for sid, (value, _) in reusability.items()})
    assert ranking.rank_values(values, True).to_dict() == {  # the finding: "> k" taken for above every value
        "above-20": 1, "above-10": 1, "above-8": 1, "fifteen": 4, "eight": 5}

    frame, note = tables.ranked(Catalog(store), "variability", "w1kp_reusability")
    assert dict(zip(frame["model"], frame["rank"])) == {"above-20": 1, "above-10": 1, "above-8": 1, "fifteen": 2,
                                                        "eight": 5}
    shown = display.display(frame).set_index("Submission")
    assert shown.loc["above-10", "Score"] == "> 10" and shown.loc["fifteen", "Score"] == 15.0
    # Lower being better (a censored "> k" then worse than a measured v <= k): 5 beats "> 7", not "> 3".
    lower = ranking.rank_values(pd.Series({"five": 5.0, "above-3": np.nan, "above-7": np.nan}), False,
                                pd.Series({"above-3": 3.0, "above-7": 7.0}))
    assert lower.to_dict() == {"five": 1, "above-3": 1, "above-7": 2}
