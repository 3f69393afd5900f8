"""Meta-evaluation of metrics against the CulturalFrames raters, the results join, and the published numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmark import results
from benchmark.run_record import RunRecord
from benchmark.expectations import human, meta_eval
from benchmark.papers import CULTURALFRAMES
from benchmark.tracks.papers import culturalframes as published


def synthetic_ratings(n_images: int = 120, *, noise: float = 0.6, seed: int = 0) -> pd.DataFrame:
    """3 raters per image, 4 images (models) per prompt, prompts in two countries; each rater = the image's latent
    quality + noise, put on the scales."""
    rng = np.random.default_rng(seed)
    latent = rng.uniform(0, 1, n_images)
    rows = []
    for i, q in enumerate(latent):
        for slot in range(3):
            seen = q + rng.normal(0, noise)
            rows.append({"image_id": f"img{i:04d}", "prompt_id": f"p{i // 4:03d}",
                         "country": "India" if i // 4 % 2 else "Japan",
                         "rater_id": f"rater-{i}-{slot}", "rater_slot": slot,
                         "alignment": float(np.clip(np.round(seen * 2) / 2, 0, 1)),
                         "quality": float(np.clip(np.round((1 - seen) * 2) / 2, 0, 1)),
                         "overall": float(np.clip(np.round(1 + 4 * seen), 1, 5))})
    return pd.DataFrame(rows)


def scores_for(ratings: pd.DataFrame, values) -> pd.DataFrame:
    ids = sorted(ratings["image_id"].unique())
    return pd.DataFrame({"image_id": ids, "score": values})


# --- Spearman and its interval --------------------------------------------------------------------
def test_spearman_is_scipys_including_ties():
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 5, 80).astype(float), rng.normal(size=80)
    assert meta_eval.weighted_spearman(x, y, np.ones((1, 80))) == pytest.approx([stats.spearmanr(x, y).statistic])
    assert np.isnan(meta_eval.weighted_spearman(np.ones(10), y[:10], np.ones((1, 10)))).all()


def test_resample_statistic_is_spearmanr_of_the_repeated_pairs():
    rng = np.random.default_rng(2)
    x, y = rng.integers(0, 3, 40).astype(float), rng.normal(size=40)
    weights = rng.integers(0, 3, (6, 40))
    expected = [stats.spearmanr(np.repeat(x, w), np.repeat(y, w)).statistic for w in weights]
    assert meta_eval.weighted_spearman(x, y, weights) == pytest.approx(expected)


def test_a_resample_of_one_prompt_twice_is_that_prompts_rank_correlation():
    # prompt A = images 0-3, prompt B = images 4-7. A drawn twice: the pairs of A, each twice. By hand: ranks of y on
    # A are 1, 3, 2, 4 against x's 1, 2, 3, 4, so d^2 sums to 2 and rho = 1 - 6 * 2 / (4 * 15) = 0.8.
    x = np.array([1.0, 2, 3, 4, 5, 6, 7, 8])
    y = np.array([1.0, 3, 2, 4, 9, 0, 9, 0])
    assert meta_eval.weighted_spearman(x, y, [[2, 2, 2, 2, 0, 0, 0, 0]]) == pytest.approx([0.8])


def test_the_bootstrap_resamples_whole_prompts():
    """2 prompts x 4 models: every resample takes all four images of a prompt as often as the prompt is drawn,
    and the prompt draws add up to two; an image-level bootstrap would split prompts."""
    prompts = ["A", "B", "A", "B", "A", "B", "A", "B"]  # image k is model k // 2 of prompt A or B
    weights = meta_eval.prompt_resample_weights(prompts, 400, np.random.default_rng(0))
    assert weights.shape == (400, 8)
    a, b = weights[:, 0::2], weights[:, 1::2]
    assert (a == a[:, :1]).all() and (b == b[:, :1]).all()  # whole prompts
    assert ((a[:, 0] + b[:, 0]) == 2).all()  # two prompt draws per resample
    patterns = {(int(p), int(q)) for p, q in zip(a[:, 0], b[:, 0])}
    assert patterns == {(2, 0), (1, 1), (0, 2)}


def test_interval_brackets_rho_and_is_reproducible():
    ratings = synthetic_ratings(200, seed=3)
    matrix = meta_eval.rater_matrix(ratings, "overall")
    prompts = ratings.groupby("image_id")["prompt_id"].first().loc[matrix.index].to_numpy()
    score = np.nanmean(matrix.to_numpy(), axis=1) + np.random.default_rng(3).normal(0, 0.3, 200)
    rho, low, high = meta_eval.metric_agreement_ci(score, matrix.to_numpy(), prompts, n_resamples=800, seed=5)
    assert rho == pytest.approx(np.mean([stats.spearmanr(score, matrix.drop(columns=k).mean(axis=1)).statistic
                                         for k in matrix.columns]))
    assert low < rho < high and high - low < 0.3
    assert meta_eval.metric_agreement_ci(score, matrix.to_numpy(), prompts, n_resamples=800, seed=5) == (rho, low, high)


# --- human-human ceiling ----------------------------------------------------------------------------
def test_ceiling_is_one_when_raters_agree_perfectly():
    ratings = synthetic_ratings(60, noise=0.0)
    for criterion in meta_eval.CRITERIA:
        assert meta_eval.leave_one_rater_out(ratings, criterion) == pytest.approx(1.0)


def test_ceiling_is_near_zero_when_raters_are_independent_noise():
    rng = np.random.default_rng(11)
    n = 3000
    ratings = pd.DataFrame({"image_id": np.repeat([f"i{k}" for k in range(n)], 3), "rater_slot": np.tile([0, 1, 2], n),
                            "alignment": rng.choice([0.0, 0.5, 1.0], 3 * n),
                            "overall": rng.integers(1, 6, 3 * n).astype(float)})
    assert abs(meta_eval.leave_one_rater_out(ratings, "alignment")) < 0.1
    assert abs(meta_eval.leave_one_rater_out(ratings, "overall")) < 0.1


def test_ceiling_matches_an_explicit_loop_over_slots():
    ratings = synthetic_ratings(40, seed=4).sample(frac=1, random_state=0)  # table order must not matter
    expected = []
    for slot in range(3):
        mine, others = [], []
        for _, image in ratings.groupby("image_id"):
            me = image[image.rater_slot == slot]["overall"].iloc[0]
            mine.append(me)
            others.append(image[image.rater_slot != slot]["overall"].mean())
        expected.append(stats.spearmanr(mine, others).statistic)
    assert meta_eval.leave_one_rater_out(ratings, "overall") == pytest.approx(np.mean(expected))


def test_slots_come_from_rater_ids_when_the_table_has_no_slot_column():
    ratings = pd.DataFrame({"image_id": ["a", "a", "b", "b", "b"], "rater_id": ["z", "m", "q", "c", "k"]})
    assert meta_eval.rater_slots(ratings).tolist() == [1, 0, 2, 0, 1]
    with_slots = synthetic_ratings(30, seed=6)
    by_id = with_slots.drop(columns="rater_slot")  # rater ids rater-<image>-<slot> sort in slot order
    assert meta_eval.leave_one_rater_out(by_id, "alignment") == pytest.approx(
        meta_eval.leave_one_rater_out(with_slots, "alignment"))


# --- the ranking table -----------------------------------------------------------------------------
def leave_one_out(score: np.ndarray, ratings: pd.DataFrame, criterion: str) -> float:
    """Explicit loop: mean over slots k of scipy's Spearman between the score (images sorted by id) and the mean of
    the ratings in the other slots."""
    rhos = []
    for slot in range(3):
        others = ratings[ratings.rater_slot != slot].groupby("image_id")[criterion].mean().sort_index()
        rhos.append(stats.spearmanr(score, others.to_numpy()).statistic)
    return float(np.mean(rhos))


def simulated(seed: int, n_prompts: int = 60, models: int = 4) -> tuple[pd.DataFrame, np.ndarray]:
    """Ratings of 3 raters and the scores of a 4th made the same way: overall 1-5 = round(3 + latent + noise),
    latent = prompt effect + image effect (sd 0.7 each), rater noise sd 1.5 (inter-rater correlation about 0.3, as
    the release's alpha of 0.36 for overall)."""
    rng = np.random.default_rng(seed)
    n = n_prompts * models
    latent = np.repeat(rng.normal(0, 0.7, n_prompts), models) + rng.normal(0, 0.7, n)
    scores = np.clip(np.round(3 + latent[:, None] + rng.normal(0, 1.5, (n, 4))), 1, 5)
    ratings = pd.DataFrame({"image_id": np.repeat([f"img{i:04d}" for i in range(n)], 3),
                            "prompt_id": np.repeat([f"p{i // models:03d}" for i in range(n)], 3), "country": "Japan",
                            "rater_slot": np.tile([0, 1, 2], n), "alignment": 0.5, "quality": 0.5,
                            "overall": scores[:, :3].ravel()})
    return ratings, scores


@pytest.mark.slow
def test_a_metric_made_like_one_more_rater_scores_the_ceiling():
    """200 seeded data sets of 240 images: a metric generated exactly like a 4th rater. Its spearman minus the
    ceiling averages 0 within noise: |mean| < 3 standard errors of the 200 differences (observed: mean 0.006,
    SE 0.0045). Correlating it with the mean of all three raters instead (the former design) puts it clearly above,
    by more than 5 standard errors (observed: mean 0.044, SE 0.005; the issue saw 0.417 against 0.381)."""
    like_for_like, all_raters = [], []
    for seed in range(200):
        ratings, scores = simulated(seed)
        metric = pd.DataFrame({"image_id": sorted(ratings["image_id"].unique()), "score": scores[:, 3]})
        row = meta_eval.meta_evaluate({"rater 4": metric}, ratings, criteria=["overall"], by_country=False,
                                      n_resamples=1).iloc[0]
        like_for_like.append(row.spearman - row.ceiling)
        all_raters.append(stats.spearmanr(scores[:, 3], scores[:, :3].mean(axis=1)).statistic - row.ceiling)
    standard_error = np.std(like_for_like, ddof=1) / np.sqrt(200)
    assert abs(np.mean(like_for_like)) < 3 * standard_error
    assert np.mean(all_raters) > 5 * np.std(all_raters, ddof=1) / np.sqrt(200)


def test_ranking_table_correlates_with_the_human_mean_per_criterion_and_country():
    ratings = synthetic_ratings(120, seed=7)
    means = ratings.groupby("image_id")[["alignment", "quality", "overall"]].mean().sort_index()
    rng = np.random.default_rng(8)
    good = means["overall"].to_numpy() + rng.normal(0, 0.2, len(means))
    noise = rng.normal(size=len(means))
    table = meta_eval.meta_evaluate({"good": scores_for(ratings, good), "noise": scores_for(ratings, noise)}, ratings,
                                    n_resamples=300)
    assert list(table.columns) == meta_eval.RANKING_COLUMNS
    assert len(table) == 2 * 3 * 3  # metrics x criteria x (all, India, Japan)
    row = table[(table.metric == "good") & (table.criterion == "overall") & (table.country == "all")].iloc[0]
    assert row.spearman == pytest.approx(leave_one_out(good, ratings, "overall"))
    assert row.n == 120 and row["rank"] == 1 and row.ci_low < row.spearman < row.ci_high
    assert row.ceiling == pytest.approx(meta_eval.leave_one_rater_out(ratings, "overall"))
    india = means.index[ratings.groupby("image_id")["country"].first().sort_index() == "India"]
    row = table[(table.metric == "good") & (table.criterion == "alignment") & (table.country == "India")].iloc[0]
    mask = means.index.isin(india)
    assert row.n == 60
    assert row.spearman == pytest.approx(leave_one_out(good[mask], ratings[ratings.image_id.isin(india)], "alignment"))
    assert row.ceiling == pytest.approx(meta_eval.leave_one_rater_out(ratings, "alignment", india))
    quality = table[(table.criterion == "quality") & (table.country == "all")]
    assert quality["metric"].tolist() == ["noise", "good"]  # quality runs against the latent: 'good' ranks last
    assert table["criterion"].tolist()[:6] == ["alignment"] * 6 and table["country"].tolist()[:2] == ["all", "all"]


def test_countries_with_too_few_images_are_left_out():
    ratings = synthetic_ratings(50, seed=9)
    table = meta_eval.meta_evaluate({"m": scores_for(ratings, np.arange(50.0))}, ratings, min_images=30,
                                    n_resamples=100)
    assert set(table["country"]) == {"all"}


# --- uploaded score files ----------------------------------------------------------------------------
KNOWN = [f"img{i:04d}" for i in range(40)]


def upload(ids, scores=None):
    return pd.DataFrame({"image_id": ids, "score": np.arange(len(ids), dtype=float) if scores is None else scores})


def test_a_valid_csv_and_parquet_file_are_read(tmp_path):
    table = upload(KNOWN)
    table.to_csv(tmp_path / "scores.csv", index=False)
    table.assign(extra="x").to_parquet(tmp_path / "scores.parquet")
    for name in ("scores.csv", "scores.parquet"):
        read = meta_eval.read_scores(tmp_path / name, KNOWN)
        assert read["image_id"].tolist() == KNOWN and read["score"].tolist() == list(range(40))


@pytest.mark.parametrize("table, message", [
    (pd.DataFrame({"image_id": KNOWN, "value": 1.0}), "missing column(s) ['score']; a scores table has columns "
                                                      "image_id, score (found: image_id, value)"),
    (upload(KNOWN, ["high"] + [1.0] * 39), "1 score(s) are not numbers, for image ids 'img0000'"),
    (upload(KNOWN, [np.nan, 1.0, np.inf] + [1.0] * 37), "2 score(s) are NaN or infinite, for image ids 'img0000', "
                                                        "'img0002'"),
    (upload(KNOWN + ["img0003", "img0007"]), "2 image id(s) appear more than once: 'img0003', 'img0007'"),
    (upload(KNOWN + [f"new{i}" for i in range(7)]), "7 image id(s) have no CulturalFrames rating: 'new0', 'new1', "
                                                    "'new2', 'new3', 'new4' and 2 more"),
    (upload(KNOWN[:3]), "only 3 image(s) overlap the rated images ('img0000', 'img0001', 'img0002'); a rank "
                        "correlation needs at least 20"),
    (upload([None] + KNOWN[1:]), "1 row(s) have no image_id"),
])
def test_bad_score_files_are_rejected_with_the_problem_and_examples(tmp_path, table, message):
    path = tmp_path / "upload.csv"
    table.to_csv(path, index=False)
    with pytest.raises(meta_eval.ScoresError) as error:
        meta_eval.read_scores(path, KNOWN)
    assert str(error.value).startswith(f"{path}: {message}")


def test_unreadable_or_unsupported_files_are_rejected(tmp_path):
    (tmp_path / "scores.json").write_text("{}")
    with pytest.raises(meta_eval.ScoresError, match="must be .csv or .parquet"):
        meta_eval.read_scores(tmp_path / "scores.json", KNOWN)
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    with pytest.raises(meta_eval.ScoresError, match="cannot be read as parquet"):
        meta_eval.read_scores(tmp_path / "broken.parquet", KNOWN)


def test_collect_scores_needs_something_to_evaluate(tmp_path):
    upload(KNOWN).to_csv(tmp_path / "mine.csv", index=False)
    assert meta_eval.collect_scores(tmp_path, files={"mine": tmp_path / "mine.csv"})["mine"].shape == (40, 2)
    with pytest.raises(meta_eval.ScoresError, match="no scores to meta-evaluate"):
        meta_eval.collect_scores(tmp_path)
    with pytest.raises(meta_eval.ScoresError, match="results folders given without the metrics"):
        meta_eval.collect_scores(tmp_path, results=[tmp_path])


def test_a_ratings_table_without_country_is_refused():
    with pytest.raises(ValueError, match=r"ratings table has no column\(s\) \['country'\]"):
        meta_eval.human_means(synthetic_ratings(5).drop(columns="country"))


# --- CultureLens per-image results -> CulturalFrames image ids ---------------------------------------
IMAGES = pd.DataFrame({
    "image_id": ["p1_flux", "p2_flux", "p1_SD35", "p2_SD35"],
    "prompt_id": ["cf-1", "cf-2", "cf-1", "cf-2"],
    "model": ["FLUX.1-dev", "FLUX.1-dev", "SD-3.5-Large", "SD-3.5-Large"],
    "image_sha256": ["a1", "a2", "b1", "b2"],
})


def per_image(rows: list[dict]) -> pd.DataFrame:
    return results.table([{"track": "awareness", **r} for r in rows], results.PER_IMAGE).to_pandas()


def test_results_map_to_image_ids_by_prompt_and_model(tmp_path):
    flux = {"model": "flux", "seed": 0}
    rows = [{**flux, "prompt_id": "cf-1", "metric": "clip_score", "value": 0.3, "image_sha256": "a1"},
            {**flux, "prompt_id": "cf-2", "metric": "clip_score", "value": 0.2, "image_sha256": "a2"},
            {**flux, "prompt_id": "cf-2", "metric": "clip_cosine", "value": 0.1}]
    folder = results.write_folder(tmp_path / "r", [{"track": "awareness", **r} for r in rows], [], [], RunRecord())
    mapped = meta_eval.scores_from_results(folder, IMAGES, "clip_score")
    assert mapped.to_dict("list") == {"image_id": ["p1_flux", "p2_flux"], "score": [0.3, 0.2]}
    renamed = per_image([{**r, "model": "My FLUX export"} for r in rows[:2]])
    assert meta_eval.scores_from_results(renamed, IMAGES, "clip_score", model="Flux.1-Dev")["image_id"].tolist() == [
        "p1_flux", "p2_flux"]


def test_results_that_are_not_the_rated_images_are_rejected():
    fresh = per_image([{"model": "SD-3.5-Large", "prompt_id": "cf-1", "seed": 0, "metric": "m", "value": 1.0,
                        "image_sha256": "other"}])
    with pytest.raises(meta_eval.ScoresError, match=r"1 scored image\(s\) are not the rated image .*'p1_SD35'"):
        meta_eval.scores_from_results(fresh, IMAGES, "m")
    unknown = per_image([{"model": "GPT-Image", "prompt_id": "cf-1", "seed": 0, "metric": "m", "value": 1.0}])
    with pytest.raises(meta_eval.ScoresError, match=r"are no CulturalFrames image: 'cf-1 / GPT-Image'"):
        meta_eval.scores_from_results(unknown, IMAGES, "m")
    with pytest.raises(meta_eval.ScoresError, match=r"no per-image value of metric 'x'; metrics present: m"):
        meta_eval.scores_from_results(unknown, IMAGES, "x")


def test_several_seeds_per_prompt_need_a_seed_choice():
    rows = per_image([{"model": "SD35", "prompt_id": "cf-2", "seed": s, "metric": "m", "value": float(s)}
                      for s in (0, 1)])
    with pytest.raises(meta_eval.ScoresError, match=r"several images per prompt and model \('cf-2 / SD-3.5-Large'\)"):
        meta_eval.scores_from_results(rows, IMAGES, "m")
    assert meta_eval.scores_from_results(rows, IMAGES, "m", seed=1).to_dict("list") == {
        "image_id": ["p2_SD35"], "score": [1.0]}


def test_each_metric_is_recorded_with_the_version_its_results_were_scored_under(tmp_path):
    """A judge's correlation belongs to that judge: versions come from run.json, and folders scored under two
    versions of one metric are not pooled."""
    def folder(name, versions):
        return results.write_folder(tmp_path / name, [], [], [], RunRecord(metrics=versions))

    a = folder("a", {"expectations_met": "1 (judge org/vlm@c1)", "clip_score": "1"})
    b = folder("b", {"expectations_met": "1 (judge org/vlm@c1)"})
    other = folder("c", {"expectations_met": "1 (judge org/other@c9)"})
    assert meta_eval.metric_versions([a, b / "per_image.parquet"], ["expectations_met", "clip_score", "m"]) == {
        "expectations_met": "1 (judge org/vlm@c1)", "clip_score": "1", "m": ""}
    with pytest.raises(meta_eval.ScoresError, match=r"expectations_met: the results folders were scored under "
                       r"different versions \(1 \(judge org/other@c9\); 1 \(judge org/vlm"):
        meta_eval.metric_versions([a, other], ["expectations_met"])


def test_the_agreement_shown_beside_a_metric_is_its_pooled_computed_row():
    columns = ["provenance", "metric", "criterion", "country", "spearman", "n"]
    table = pd.DataFrame([("reported", "m", "alignment", "all", 0.3, None),
                          ("scored", "m", "alignment", "Japan", 0.5, 40),
                          ("scored", "m", "overall", "all", 0.4, 90),
                          ("scored", "m", "alignment", "all", 0.2, 90),
                          ("scored", "m", "alignment", "all", 0.1, 30),
                          ("scored", "other", "alignment", "all", 0.9, 90)], columns=columns)
    assert meta_eval.agreement(table, "m")["spearman"] == 0.2  # computed, every country, alignment, most images
    assert meta_eval.agreement(table, "m", "overall")["spearman"] == 0.4
    assert meta_eval.agreement(table, "absent") is None
    assert meta_eval.agreement(table[table["provenance"] == "reported"], "m") is None


# --- published numbers -------------------------------------------------------------------------------
def test_published_rows_carry_their_citation_and_use_our_names():
    human_rows = published.human_rows()
    assert {r["statistic"] for r in human_rows} <= set(human.IMAGE_MEANS) | set(human.FAILURE_SHARES)
    assert all(r["citation"] == CULTURALFRAMES.text and r["provenance"] == "reported" for r in human_rows)
    alignment = {r["model"]: r["value"] for r in human_rows if r["statistic"] == "mean_alignment"}
    assert alignment == {"GPT-Image": 0.85, "Imagen 3": 0.79, "SD-3.5-Large": 0.66, "FLUX.1-dev": 0.63}
    shares = {r["statistic"]: r["value"] for r in human_rows if r["model"] == "all"}
    assert shares["explicit_only_share"] + shares["both_share"] == pytest.approx(0.682)  # the stated 68%
    assert shares["implicit_only_share"] + shares["both_share"] == pytest.approx(shares["implicit_share"])
    ranking = published.ranking_rows()
    assert set(meta_eval.RANKING_COLUMNS) <= set(ranking[0])
    vie = {(r["metric"], r["criterion"]): (r["spearman"], r["ceiling"]) for r in ranking}
    assert vie[("VIEScore (GPT-4o)", "alignment")] == (0.30, 0.38)
    assert vie[("VIEScore (GPT-4o)", "overall")] == (0.31, 0.42)
    assert {r["criterion"]: r["alpha"] for r in published.agreement_rows()} == {
        "alignment": 0.37, "quality": 0.28, "overall": 0.36}


def test_leaderboard_rows_agree_with_the_reported_rows_already_shown():
    from leaderboard import reported

    shown = {r["model"]: r["value"] for r in reported.rows() if r["metric"] == "human_alignment"}
    ours = {r["model"]: r["value"] for r in published.leaderboard_rows() if r["metric"] == "human_alignment"}
    assert ours == shown
    assert all(set(r) <= set(results.AGGREGATE.names) for r in published.leaderboard_rows())
