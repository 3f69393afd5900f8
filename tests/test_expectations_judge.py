"""Expectations: explicit and implicit ratings of a VIEScore-style VLM judge (CulturalFrames, arXiv:2506.08835;
VIEScore, arXiv:2312.14867; G-Eval's expected score, arXiv:2303.16634). The pure parts on hand-made values; the
judge on the tiny random Qwen2.5-VL of the judge tests, checked against the model's own logits; the metrics with
the products cache; and `culturelens score --tracks expectations` then `meta-eval --results` on a tiny
CulturalFrames release, down to the agreement the Overview shows beside the metric."""

from __future__ import annotations

import html
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from PIL import Image
from scipy import stats

from benchmark.judges.constrained import restricted_softmax
from benchmark.judges.prompts import expectation_prompt, viescore_prompt
from benchmark.metrics.base import Inputs
from benchmark.metrics.expectations import expectations_met, expected_score, likeliest_answer
from benchmark.run_record import RunRecord
from culturelens.testing.tiny_qwen import model_next_logits, random_image, token_id

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --- the prompts and the arithmetic, by hand -----------------------------------------------------------------
def test_each_kinds_prompt_keeps_fig_24_for_that_kind_only():
    full = viescore_prompt("A family dinner in Poland")
    explicit = expectation_prompt("A family dinner in Poland", "explicit")
    implicit = expectation_prompt("A family dinner in Poland", "implicit")
    opening = full[:full.index("You will give a score")]
    assert explicit.startswith(opening) and implicit.startswith(opening)  # Fig. 24's opening, word for word
    assert "**Explicit Elements:** Explicit elements are the clearly stated words" in explicit
    assert "**Implicit Elements**" not in explicit and "Rate the explicit elements only" in explicit
    assert "**Implicit Elements** These are elements of the prompt that are not directly mentioned" in implicit
    assert "**Explicit Elements:**" not in implicit and "the explicit elements are rated separately" in implicit
    for text in (explicit, implicit):
        assert text.endswith("Put the score in a list such that output score = [score].\n\n"
                             "Text Prompt: A family dinner in Poland")
    with pytest.raises(ValueError, match="unknown expectation kind 'cultural'"):
        expectation_prompt("x", "cultural")


def test_expected_score_and_likeliest_answer_by_hand():
    one_hot = np.eye(11)[7]
    assert expected_score(one_hot) == 7.0 and likeliest_answer(one_hot) == 7
    spread = np.zeros(11)
    spread[[3, 4, 5]] = [0.2, 0.6, 0.2]  # 3 x 0.2 + 4 x 0.6 + 5 x 0.2
    assert expected_score(spread) == pytest.approx(4.0) and likeliest_answer(spread) == 4
    split = np.zeros(11)
    split[[2, 8]] = 0.5  # the expectation sits between them; the likeliest answer is the lower of the tie
    assert expected_score(split) == pytest.approx(5.0) and likeliest_answer(split) == 2
    batch = np.stack([one_hot, spread, split]).reshape(3, 1, 11)
    assert expected_score(batch).ravel() == pytest.approx([7.0, 4.0, 5.0])
    with pytest.raises(ValueError, match="expected 11 probabilities"):
        expected_score(np.ones(5) / 5)


def test_expectations_met_is_the_lower_of_the_two_ratings():
    assert expectations_met([7.0, 3.5, 10.0, 0.0], [6.0, 9.0, 10.0, 2.5]).tolist() == [6.0, 3.5, 10.0, 0.0]


# --- the judge on the tiny random Qwen2.5-VL ------------------------------------------------------------------
@pytest.fixture(scope="module")
def judge(tiny_qwen_vl):
    from benchmark.judges.expectations import ExpectationsJudge
    from benchmark.judges.vlm import VLMJudge

    return ExpectationsJudge(VLMJudge(str(tiny_qwen_vl), device="cpu", batch_size=4))


def test_the_judges_probabilities_are_the_models_own_0_to_10_distribution(judge):
    """P(k) after "output score = [": the first digit from the model's logits restricted to 0-9, then "1" splits
    into "1]" and "10]" by the logits after "1" restricted to "]" and "0"."""
    from benchmark.judges.expectations import ExpectationRequest

    vlm = judge.vlm
    digits = [token_id(vlm, str(k)) for k in range(10)]
    close, zero = token_id(vlm, "]"), token_id(vlm, "0")
    requests = [ExpectationRequest("Grandchildren touching grandfather's feet at an Indian temple", kind)
                for kind in ("explicit", "implicit")]
    images = [random_image(3), random_image(3)]
    produced = judge.produce_batch(images, requests)
    for image, request, p in zip(images, requests, produced):
        chat = vlm.render(expectation_prompt(request.prompt, request.kind), answer_prefix="output score = [")
        assert judge.prompt(request) == chat and judge.label(request) == request.kind
        first = model_next_logits(vlm, image, chat)[digits]
        first = np.exp(first - first.max()) / np.exp(first - first.max()).sum()
        after_one = model_next_logits(vlm, image, chat + "1")[[close, zero]]
        after_one = np.exp(after_one - after_one.max()) / np.exp(after_one - after_one.max()).sum()
        expected = [first[0], first[1] * after_one[0], *first[2:], first[1] * after_one[1]]
        assert p == pytest.approx(expected, abs=1e-4) and p.sum() == pytest.approx(1.0)
    assert not np.allclose(produced[0], produced[1])  # the two kinds are two questions


def test_judge_prefix_expectations_both_kinds_and_10_from_two_passes_per_image(judge):
    """Three images, each rated for both kinds: the judge runs each image's shared tokens (the image and Fig. 24's
    opening) once and both kinds' tails in one more pass, whose last two positions give the first digit and the
    split of "1" into "1]" and "10]" (before: four whole-prompt passes per image). Every probability equals the
    model's own over the whole prompt within 1e-5 (float32, CPU)."""
    from benchmark.judges.expectations import ExpectationRequest

    vlm = judge.vlm
    digits = [token_id(vlm, str(k)) for k in range(10)]
    close, zero = token_id(vlm, "]"), token_id(vlm, "0")
    images = [random_image(20 + n, size=56 + 28 * n) for n in range(3)]
    requests = [ExpectationRequest(f"A family greeting elders at the door, home {n}", kind)
                for n in range(3) for kind in ("explicit", "implicit")]
    paired = [image for image in images for _ in range(2)]
    passes = []
    handle = vlm.model.register_forward_hook(lambda *_: passes.append(1))
    try:
        produced = judge.produce_batch(paired, requests)
    finally:
        handle.remove()
    assert len(passes) == 2 * len(images)
    for image, request, p in zip(paired, requests, produced):
        chat = judge.prompt(request)
        first = restricted_softmax(model_next_logits(vlm, image, chat), digits)
        after_one = restricted_softmax(model_next_logits(vlm, image, chat + "1"), [close, zero])
        expected = [first[0], first[1] * after_one[0], *first[2:], first[1] * after_one[1]]
        assert p == pytest.approx(expected, abs=1e-5)


class _Pictures:
    """Images a metric opens by row, counting each opening."""

    def __init__(self, images: list[Image.Image]):
        self.images, self.opened = images, []

    def __call__(self, row: int) -> Image.Image:
        self.opened.append(row)
        return self.images[row]


def _inputs(prompts: list[str], pictures: _Pictures, products=None) -> Inputs:
    rows = pd.DataFrame({"prompt_id": [f"cf-{i}" for i in range(len(prompts))], "seed": 0, "prompt": prompts,
                         "image_sha256": [f"sha-{i}" for i in range(len(prompts))]})
    return Inputs(rows, {}, {}, open_image=pictures, products=products)


PROMPTS = ["Iranian family praying together at home", "Traditional Japanese tea ceremony in autumn garden",
           "Elderly Iranian man praying in a quiet mosque"]


def test_three_metrics_from_one_judging_per_kind_cached_by_content(tiny_qwen_vl, tmp_path):
    """Explicit and implicit are the expected scores of the judge's distributions, met their minimum; a rescore
    with the same products cache and a fresh judge makes no model call; another prompt text misses."""
    from benchmark.cache import EmbeddingCache
    from benchmark.judges.expectations import ExpectationRequest, ExpectationsJudge
    from benchmark.judges.vlm import VLMJudge
    from benchmark.metrics import expectations
    from tests.test_producers import count_forward

    images = [random_image(10 + i, size=48 + 8 * i) for i in range(3)]

    def score(prompts, cache):
        judge = ExpectationsJudge(VLMJudge(str(tiny_qwen_vl), device="cpu", batch_size=4))
        calls, pictures = count_forward(judge.vlm.model), _Pictures(images)
        inputs = _inputs(prompts, pictures, cache)
        built = expectations.metrics(judge)
        out = {m.info.name: (*m.per_image(inputs), m.details(inputs)) for m in built}
        return judge, built, out, len(calls), len(pictures.opened)

    cache = EmbeddingCache(tmp_path / "cache.sqlite").beside("products")
    judge, built, first, calls, opened = score(PROMPTS, cache)
    assert [m.info.name for m in built] == ["expectations_explicit", "expectations_implicit", "expectations_met"]
    assert all(m.info.track == "expectations" and m.info.higher_is_better and (m.info.low, m.info.high) == (0, 10)
               and m.info.version == f"2 (judge {judge.id})" and m.info.needs == () for m in built)
    assert calls > 0 and opened == 3  # each image opened once for both kinds and the three metrics
    for kind in ("explicit", "implicit"):
        distributions = judge.produce_batch(images, [ExpectationRequest(p, kind) for p in PROMPTS])
        values, notes, details = first[f"expectations_{kind}"]
        assert values == pytest.approx([float(np.arange(11) @ p) for p in distributions], abs=1e-6)
        assert np.array([d[f"{kind}_probabilities"] for d in details]) == pytest.approx(np.array(distributions),
                                                                                       abs=1e-6)
        assert [d[f"{kind}_answer"] for d in details] == [int(np.argmax(p)) for p in distributions]
        assert notes[0].startswith(f"explicit {first['expectations_explicit'][0][0]:.2f} (likeliest ")
    assert first["expectations_met"][0].tolist() == np.minimum(first["expectations_explicit"][0],
                                                               first["expectations_implicit"][0]).tolist()
    _, _, again, calls, opened = score(PROMPTS, EmbeddingCache(tmp_path / "cache.sqlite").beside("products"))
    assert (calls, opened) == (0, 0)
    assert all(np.array_equal(again[name][0], first[name][0]) for name in first)
    _, _, _, calls, opened = score([*PROMPTS[:2], "Elderly Iranian man praying at home"], cache)
    assert calls > 0 and opened == 1  # only the image whose prompt changed is judged again


def test_the_track_needs_a_judge_and_says_which_flag_names_it(tiny_qwen_vl):
    from benchmark import tracks

    metrics, unavailable = tracks.build(tracks.metric_settings(), tracks=["expectations"])
    assert metrics == [] and [u.name for u in unavailable] == ["expectations"]
    assert "--expectations-judge" in unavailable[0].reason and "CULTURELENS_EXPECTATIONS_JUDGE" in unavailable[0].reason
    metrics, _ = tracks.build(tracks.metric_settings(expectations_judge=str(tiny_qwen_vl)), tracks=["expectations"])
    assert [m.info.name for m in metrics] == ["expectations_explicit", "expectations_implicit", "expectations_met"]
    assert tracks.get("expectations").headline == "expectations_met"
    _, unavailable = tracks.build(tracks.metric_settings(expectations_judge=str(tiny_qwen_vl / "absent")),
                                  tracks=["expectations"])
    assert "cannot load judge model" in unavailable[0].reason and "save_pretrained" in unavailable[0].reason


# --- the command line, on a tiny CulturalFrames release -------------------------------------------------------
@pytest.fixture(scope="module")
def scored(tmp_path_factory, tiny_qwen_vl, tiny_upstream):
    """A store holding the tiny release's build, two models' rated images exported and scored by
    `culturelens score --tracks expectations` with the tiny judge, and `culturelens meta-eval` run on them into the
    store. Returns (root, store, dataset, {model: results folder}, meta-eval process)."""
    from benchmark.datasets import cube_1k
    from benchmark.datasets import culturalframes as cf
    from benchmark.datasets.prompts import local_folder
    from benchmark.expectations.rated_images import export_submission
    from tests.helpers import culturelens
    from tests.test_culturalframes import release_rows, write_release

    root = tmp_path_factory.mktemp("expectations-cli")
    store = root / "store"
    cube_1k.build(str(tiny_upstream), local_folder(store / "datasets", cube_1k.HUB_REPO))  # `score`'s default set
    dataset = local_folder(store / "datasets", cf.HUB_REPO)
    cf.build(write_release(root / "release", *release_rows()), dataset)
    folders = {}
    for model in ("flux", "SD35"):
        submission = export_submission(dataset, model, root / f"submission-{model}")
        out = root / f"out-{model}"
        run = culturelens("score", str(submission), "--out", str(out), "--store", str(store), "--tracks",
                          "expectations", "--expectations-judge", str(tiny_qwen_vl), "--device", "cpu")
        assert run.returncode == 0, run.stderr[-3000:]
        (folders[model],) = (out / "results").iterdir()
    meta = culturelens("meta-eval", "--ratings", str(dataset), "--results", *map(str, folders.values()),
                       "--metrics", "expectations_met", "expectations_explicit", "--min-images", "3",
                       "--no-countries", "--resamples", "50", "--store", str(store))
    return root, store, dataset, folders, meta


@pytest.mark.slow
def test_score_tracks_expectations_scores_each_rated_image_under_the_judges_protocol(scored, tiny_qwen_vl):
    from benchmark import tracks

    _, _, dataset, folders, _ = scored
    for model, folder in folders.items():
        per_image = pq.read_table(folder / "per_image.parquet").to_pandas()
        assert sorted(per_image["metric"].unique()) == ["expectations_explicit", "expectations_implicit",
                                                        "expectations_met"]
        wide = per_image.pivot_table(index="prompt_id", columns="metric", values="value")
        assert len(wide) == 3 and wide.notna().all().all() and wide.stack().between(0, 10).all()
        assert (wide["expectations_met"] == wide[["expectations_explicit", "expectations_implicit"]].min(axis=1)).all()
        run = json.loads((folder / "run.json").read_text())
        assert run["metrics"]["expectations_met"] == f"2 (judge {tiny_qwen_vl}@local, shared prefix)"
        assert run["settings"]["metric_settings"]["expectations_judge"] == str(tiny_qwen_vl.resolve())
        aggregates = pq.read_table(folder / "aggregates.parquet").to_pandas()
        headline = aggregates[(aggregates["metric"] == "expectations_met") & (aggregates["slice"] == "overall")]
        assert headline["value"].iloc[0] == pytest.approx(wide["expectations_met"].mean())
        protocol = headline["protocol"].iloc[0]
        assert json.loads(protocol)["dataset"] == "culturelens/culturalframes:prompts:test"
        # The tiny judge is not the headline protocol's: its rows rank under their own protocol.
        assert not tracks.on_protocol("expectations", protocol)
        fields = {**json.loads(protocol),
                  "metric_version": "2 (judge Qwen/Qwen2.5-VL-7B-Instruct@abc123, shared prefix)"}
        assert tracks.on_protocol("expectations", json.dumps(fields))


@pytest.mark.slow
def test_meta_eval_of_the_judge_is_recorded_and_shown_beside_its_ranking(scored, tiny_qwen_vl):
    from benchmark import layout, results
    from benchmark.datasets import culturalframes as cf
    from benchmark.expectations import meta_eval
    from leaderboard.ui.overview import OverviewTab
    from leaderboard.ui.site import Site
    from leaderboard.store import Store

    root, store_root, dataset, folders, meta = scored
    assert meta.returncode == 0, meta.stderr[-3000:]
    table = Store(store_root).meta_evaluation()
    ours = table[(table["provenance"] == "scored") & (table["metric"] == "expectations_met")
                 & (table["criterion"] == "alignment")].iloc[0]
    assert ours["n"] == 6 and ours["metric_version"] == f"2 (judge {tiny_qwen_vl}@local, shared prefix)"
    # Like for like with the raters, by an explicit loop: for each rater slot, scipy's Spearman between the judge's
    # values and the mean of the other two raters; slots whose target does not vary (slot 2: every image's other
    # raters say 1 and ½) leave the mean, as meta_eval leaves them out.
    images = cf.load_config(dataset, "images", columns=["image_id", "prompt_id", "model", "image_sha256"])
    scores = pd.concat([meta_eval.scores_from_results(f, images, "expectations_met") for f in folders.values()])
    ratings = cf.load_config(dataset, "ratings")
    ratings = ratings[ratings["image_id"].isin(scores["image_id"])]
    score = scores.set_index("image_id")["score"].sort_index()
    rhos = []
    for slot in range(3):
        others = ratings[ratings["rater_slot"] != slot].groupby("image_id")["alignment"].mean().sort_index()
        rhos.append(stats.spearmanr(score, others).statistic if others.nunique() > 1 else np.nan)
    assert np.isnan(rhos[2]) and ours["spearman"] == pytest.approx(np.nanmean(rhos), abs=1e-3)

    # The Overview of the expectations track: the judge's headline ranking, its agreement in the note.
    store = Store(store_root)
    store.seed_reported()  # the paper's rows: the raters' human_alignment of the four models
    for folder in folders.values():
        results.write_folder(layout.results_folder(store.root, folder.name),
                             *(pq.read_table(folder / name).to_pylist() for name in
                               (layout.PER_IMAGE, layout.AGGREGATES, layout.CURVES)),
                             RunRecord.parse((folder / "run.json").read_bytes()))
    views = OverviewTab(Site(store, "ada"))
    _, metric, shown, note, *_ = views.overview("expectations", None, "", [], None, None, "", [],
                                                ["Rank", "Model", "Score"])
    assert metric["value"] == "expectations_met"
    assert sorted(html.unescape(m).split("]")[0].strip("[") for m in shown["Model"]) == ["FLUX.1-dev", "SD-3.5-Large"]
    # The tiny release's raters in slots 0 and 1 give every image 1 and ½: no rater ranks images, no ceiling.
    assert np.isnan(ours["ceiling"])
    read = html.unescape(note)
    # The operator's judge folder is named by its last name only, never its path (issue 50, finding 5).
    assert str(tiny_qwen_vl.parent) not in read
    assert (f"**Agreement of the judge <code>{tiny_qwen_vl.name}@local (local folder)</code> with the CulturalFrames "
            "raters** "
            "(alignment, `culturelens meta-eval`): per image, Spearman ρ "
            f"{ours['spearman']:.2f} [{ours['ci_low']:.2f}, {ours['ci_high']:.2f}] over 6 images") in read
    assert "per model" in read and "not measured for this judge" not in read
    _, metric, shown, human_note, *_ = views.overview("expectations", "human_alignment", "", [], None, None, "",
                                                      [], ["Rank", "Model", "Score"])
    assert metric["value"] == "human_alignment" and len(shown) == 4  # the raters' rows, under the paper's protocol
    assert "with the CulturalFrames raters" not in human_note  # the raters' own rows: no judge to measure
