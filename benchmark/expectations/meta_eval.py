"""Meta-evaluation: does an automatic metric rank the CulturalFrames images as the human raters do?

Nayak et al., "CulturalFrames: Assessing Cultural Expectation Alignment in
Text-to-Image Models and Evaluation Metrics", arXiv:2506.08835, Sec. 6 and
Fig. 7: Spearman rank correlation between a metric's per-image score and the
raters' score, per criterion (alignment, quality, overall), next to the
human-human agreement. The paper does not say how its human-human value is
formed; here it is the leave-one-rater-out correlation defined in
``leave_one_rater_out``.

A metric's scores are a table (image_id, score) with higher = better (negate a
lower-is-better metric first): from an uploaded CSV/Parquet file
(``read_scores``) or from CultureLens per-image results of a submission made of
the CulturalFrames images themselves (``scores_from_results``). The output is a
ranking table of metrics: metric, criterion, country, spearman, ci_low, ci_high,
n, ceiling, rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from benchmark.datasets.culturalframes import canonical_model, load_config

CRITERIA = ("alignment", "quality", "overall")
ALL = "all"
MIN_IMAGES = 20
RANKING_COLUMNS = ["metric", "criterion", "country", "spearman", "ci_low", "ci_high", "n", "ceiling", "rank"]


class ScoresError(ValueError):
    """A metric's scores cannot be meta-evaluated; the message names the problem and example image ids."""


def _examples(ids: Iterable) -> str:
    ids = list(dict.fromkeys(ids))
    shown = ", ".join(repr(i) for i in ids[:5])
    return shown + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")


def _read_table(source: str | Path) -> pd.DataFrame:
    path = Path(source)
    if not path.is_file():
        raise ScoresError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            return pd.read_csv(path, dtype={"image_id": str})
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
    except (ValueError, OSError) as error:
        raise ScoresError(f"{path}: cannot be read as {suffix[1:]} ({str(error).splitlines()[0][:200]})") from None
    raise ScoresError(f"{path}: a scores file must be .csv or .parquet")


def read_scores(source: str | Path | pd.DataFrame, known_image_ids: Iterable[str], *,
                min_images: int = MIN_IMAGES, name: str | None = None) -> pd.DataFrame:
    """Check a metric's per-image scores and return them as (image_id, score).

    ``source``: a CSV or Parquet file with columns ``image_id`` and ``score``
    (other columns are ignored), or such a DataFrame. Rejected, each with a
    ScoresError naming the problem and up to five example ids: a missing column,
    a missing image id, a score that is not a number, NaN or infinite, an image id
    given twice, an image id that has no CulturalFrames rating, fewer than
    ``min_images`` images.
    """
    label = name or (str(source) if not isinstance(source, pd.DataFrame) else "scores")
    table = source if isinstance(source, pd.DataFrame) else _read_table(source)
    missing = [c for c in ("image_id", "score") if c not in table.columns]
    if missing:
        raise ScoresError(f"{label}: missing column(s) {missing}; a scores table has columns image_id, score "
                          f"(found: {', '.join(map(str, table.columns)) or 'none'})")
    ids = table["image_id"]
    blank = ids.isna() | (ids.astype(str).str.strip() == "")
    if blank.any():
        raise ScoresError(f"{label}: {int(blank.sum())} row(s) have no image_id "
                          f"(rows {_examples(np.flatnonzero(blank))})")
    ids = ids.astype(str).str.strip()
    raw = table["score"]
    score = pd.to_numeric(raw, errors="coerce").astype(float)
    text = score.isna() & raw.notna()
    if text.any():
        raise ScoresError(f"{label}: {int(text.sum())} score(s) are not numbers, for image ids {_examples(ids[text])}")
    bad = ~np.isfinite(score.to_numpy())
    if bad.any():
        raise ScoresError(f"{label}: {int(bad.sum())} score(s) are NaN or infinite, "
                          f"for image ids {_examples(ids[bad])}")
    repeated = ids[ids.duplicated(keep=False)]
    if len(repeated):
        raise ScoresError(f"{label}: {repeated.nunique()} image id(s) appear more than once: {_examples(repeated)}; "
                          "give one score per image")
    known = set(known_image_ids)
    unknown = ids[~ids.isin(known)]
    if len(unknown):
        raise ScoresError(f"{label}: {len(unknown)} image id(s) have no CulturalFrames rating: {_examples(unknown)}; "
                          "use the image_id column of the CulturalFrames images config")
    if len(ids) < min_images:
        raise ScoresError(f"{label}: only {len(ids)} image(s) overlap the rated images ({_examples(ids)}); "
                          f"a rank correlation needs at least {min_images}")
    return pd.DataFrame({"image_id": ids.to_numpy(), "score": score.to_numpy()})


def human_means(ratings: pd.DataFrame) -> pd.DataFrame:
    """Per image (index image_id): its country and the mean of its raters' scores per criterion."""
    missing = {"image_id", "country", *CRITERIA} - set(ratings.columns)
    if missing:
        raise ValueError(f"ratings table has no column(s) {sorted(missing)}: pass the CulturalFrames ratings config")
    grouped = ratings.groupby("image_id", sort=True)
    return pd.concat([grouped["country"].first(), grouped[list(CRITERIA)].mean()], axis=1)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (``scipy.stats.spearmanr``, average ranks for ties); nan if either side is constant."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    return float(stats.spearmanr(x, y).statistic)


def _spearman_along(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's rho of each resample along ``axis``: Pearson correlation of average ranks (= spearmanr)."""
    rx, ry = stats.rankdata(x, axis=axis), stats.rankdata(y, axis=axis)
    rx = rx - rx.mean(axis=axis, keepdims=True)
    ry = ry - ry.mean(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=axis) / np.sqrt((rx**2).sum(axis=axis) * (ry**2).sum(axis=axis))


def spearman_ci(x: np.ndarray, y: np.ndarray, *, confidence: float = 0.95, n_resamples: int = 2000,
                seed: int = 0) -> tuple[float, float, float]:
    """Spearman's rho of paired per-image values and its percentile bootstrap CI, resampling images (pairs).

    Resamples where one side is constant have no rho and are left out of the percentiles. nan for
    fewer than three images or a constant side.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    rho = spearman(x, y)
    if x.size < 3 or np.isnan(rho):
        return rho, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = []
    for start in range(0, n_resamples, 250):  # batches keep memory at 250 x n
        index = rng.integers(0, x.size, size=(min(250, n_resamples - start), x.size))
        draws.append(_spearman_along(x[index], y[index]))
    draws = np.concatenate(draws)
    draws = draws[np.isfinite(draws)]
    if not draws.size:
        return rho, float("nan"), float("nan")
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return rho, float(low), float(high)


def rater_slots(ratings: pd.DataFrame) -> pd.Series:
    """Slot of each rating within its image: 0, 1, 2, ...

    The release's rater ids differ from image to image (or are absent), so raters
    cannot be followed across images; a slot is the position a rating holds among
    its image's ratings instead. The ``rater_slot`` column when present (the
    builder sets it to the rating's position in the release's list), else the
    rank of ``rater_id`` within the image (ids sorted as strings, ties in table
    order).
    """
    if "rater_slot" in ratings:
        return ratings["rater_slot"].astype(int)
    order = ratings.assign(_id=ratings["rater_id"].astype(str)).sort_values(["image_id", "_id"], kind="stable")
    return order.groupby("image_id").cumcount().reindex(ratings.index)


def leave_one_rater_out(ratings: pd.DataFrame, criterion: str, image_ids: Iterable[str] | None = None) -> float:
    """Human-human ceiling of a criterion: how well one rater's scores rank images like the other raters.

    For each rater slot k (``rater_slots``): x_k(i) is the score of the rating in
    slot k of image i and y_k(i) the mean score of the other ratings of image i;
    rho_k = Spearman(x_k, y_k) over the images that have slot k and at least one
    other rating. ceiling = mean of rho_k over the slots where rho_k is defined
    (at least three images, neither side constant). With the release's three
    raters per image, slots 0, 1 and 2 each cover every image.

    Raters who agree perfectly give 1 (given that images differ); raters who are
    independent noise give about 0. nan if no slot has a defined rho.
    """
    table = ratings.loc[ratings[criterion].notna(), ["image_id", criterion]].copy()
    if image_ids is not None:
        table = table[table["image_id"].isin(set(image_ids))]
    table["slot"] = rater_slots(ratings).loc[table.index]
    grouped = table.groupby("image_id")[criterion]
    total, count = grouped.transform("sum"), grouped.transform("count")
    table["others"] = (total - table[criterion]) / (count - 1).where(count > 1)
    rhos = []
    for _, slot in table.dropna(subset=["others"]).groupby("slot"):
        if len(slot) >= 3:
            rhos.append(spearman(slot[criterion].to_numpy(), slot["others"].to_numpy()))
    rhos = [r for r in rhos if np.isfinite(r)]
    return float(np.mean(rhos)) if rhos else float("nan")


def meta_evaluate(scores: Mapping[str, pd.DataFrame], ratings: pd.DataFrame, *, criteria: Iterable[str] = CRITERIA,
                  by_country: bool = True, min_images: int = MIN_IMAGES, confidence: float = 0.95,
                  n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Ranking table of metrics by their Spearman correlation with the human mean score.

    ``scores``: metric name -> its (image_id, score) table (checked with ``read_scores``). For each metric,
    criterion and country (``"all"``, then each country when ``by_country``): spearman between the metric's
    score and the mean of the image's raters (``human_means``), its bootstrap CI over images
    (``spearman_ci``), n images, and the human-human ceiling (``leave_one_rater_out``) on the same images.
    Groups with fewer than ``min_images`` rated images are left out. ``rank`` is 1 for the highest spearman
    within a (criterion, country).
    """
    means = human_means(ratings)
    rows, ceilings = [], {}
    for metric, table in scores.items():
        checked = read_scores(table, means.index, min_images=min_images, name=metric)
        joined = checked.join(means, on="image_id")
        for criterion in criteria:
            if criterion not in CRITERIA:
                raise ValueError(f"criterion {criterion!r} is not one of {CRITERIA}")
            rated = joined.dropna(subset=[criterion])
            groups = [(ALL, rated)] + (sorted(rated.groupby("country"), key=lambda g: g[0]) if by_country else [])
            for country, group in groups:
                if len(group) < min_images:
                    continue
                rho, low, high = spearman_ci(group["score"].to_numpy(), group[criterion].to_numpy(),
                                             confidence=confidence, n_resamples=n_resamples, seed=seed)
                key = (criterion, frozenset(group["image_id"]))
                if key not in ceilings:
                    ceilings[key] = leave_one_rater_out(ratings, criterion, group["image_id"])
                rows.append({"metric": metric, "criterion": criterion, "country": country, "spearman": rho,
                             "ci_low": low, "ci_high": high, "n": len(group), "ceiling": ceilings[key]})
    table = pd.DataFrame(rows, columns=RANKING_COLUMNS[:-1])
    table["rank"] = table.groupby(["criterion", "country"])["spearman"].rank(ascending=False, method="min")
    table["rank"] = table["rank"].astype("Int64")
    order = table.assign(_criterion=table["criterion"].map({c: i for i, c in enumerate(CRITERIA)}),
                         _pooled=table["country"] != ALL)
    order = order.sort_values(["_criterion", "_pooled", "country", "rank", "metric"], kind="stable")
    return order.drop(columns=["_criterion", "_pooled"]).reset_index(drop=True)


def read_per_image(source: str | Path | pd.DataFrame) -> pd.DataFrame:
    """CultureLens per-image results (``benchmark.results.PER_IMAGE``): a DataFrame, a ``per_image.parquet`` file
    or a results folder holding one."""
    if isinstance(source, pd.DataFrame):
        return source
    path = Path(source)
    path = path / "per_image.parquet" if path.is_dir() else path
    if not path.is_file():
        raise ScoresError(f"{path}: no per-image results (a results folder has per_image.parquet)")
    return pd.read_parquet(path)


def scores_from_results(per_image: str | Path | pd.DataFrame, images: pd.DataFrame, metric: str, *,
                        model: str | None = None, seed: int | None = None) -> pd.DataFrame:
    """One metric's per-image values of a CultureLens results table, keyed by CulturalFrames image id.

    Join key: (prompt_id, model). A CulturalFrames image is the one image of a
    prompt by a model, and a submission made of those images (see
    ``benchmark.datasets.culturalframes.export_submission``) keeps the dataset's
    prompt ids; models are matched by their canonical name (``canonical_model``),
    or all rows are taken as ``model`` when given (e.g. a submission named
    differently). The join is then checked on content: where both sides have an
    ``image_sha256``, they must be equal, because the human ratings are of those
    exact images; a freshly generated image of the same prompt is not rated.

    ``images``: the CulturalFrames images config (image_id, prompt_id, model, image_sha256; the image column
    is not needed). ``seed``: keep only that seed (a submission with several images per prompt).
    """
    table = read_per_image(per_image)
    missing = {"prompt_id", "model", "metric", "value"} - set(table.columns)
    if missing:
        raise ScoresError(f"per-image results have no column(s) {sorted(missing)}: not CultureLens results")
    rows = table[table["metric"] == metric]
    if rows.empty:
        raise ScoresError(f"no per-image value of metric {metric!r}; metrics present: "
                          f"{', '.join(sorted(table['metric'].dropna().unique())) or 'none'}")
    if seed is not None:
        rows = rows[rows["seed"] == seed]
    rows = rows.assign(model=canonical_model(model) if model else rows["model"].map(canonical_model))
    pairs = rows["prompt_id"].astype(str) + " / " + rows["model"].astype(str)
    repeated = pairs[pairs.duplicated(keep=False)]
    if len(repeated):
        raise ScoresError(f"{metric}: several images per prompt and model ({_examples(repeated)}); the ratings cover "
                          "one image per prompt and model: pass the seed to use")
    joined = rows.merge(images[["image_id", "prompt_id", "model", "image_sha256"]], on=["prompt_id", "model"],
                        how="left", suffixes=("", "_rated"))
    unmatched = joined["image_id"].isna()
    if unmatched.any():
        raise ScoresError(f"{metric}: {int(unmatched.sum())} (prompt, model) pair(s) are no CulturalFrames image: "
                          f"{_examples(pairs[unmatched.to_numpy()])}")
    if "image_sha256" in joined:
        differs = joined["image_sha256"].notna() & (joined["image_sha256"] != joined["image_sha256_rated"])
        if differs.any():
            raise ScoresError(f"{metric}: {int(differs.sum())} scored image(s) are not the rated image of their prompt "
                              f"and model (content differs): {_examples(joined.loc[differs, 'image_id'])}; the ratings "
                              "are of the CulturalFrames images: score those (export_submission)")
    return pd.DataFrame({"image_id": joined["image_id"].to_numpy(), "score": joined["value"].astype(float).to_numpy()})


def collect_scores(dataset: str | Path, *, files: Mapping[str, str | Path] | None = None,
                   results: Sequence[str | Path] = (), metrics: Sequence[str] = (),
                   seed: int | None = None) -> dict[str, pd.DataFrame]:
    """Metric name -> (image_id, score) table, from uploaded files (name -> CSV/Parquet path) and from CultureLens
    results folders (typically one per exported CulturalFrames model): each of ``metrics`` gathers its per-image
    values from every folder, mapped to image ids with ``scores_from_results`` on the ``images`` config of
    ``dataset`` (a built folder or Hub repo). Tables are checked later, by ``meta_evaluate``."""
    scores = {name: _read_table(path) for name, path in (files or {}).items()}
    if results and not metrics:
        raise ScoresError("results folders given without the metrics to take from them")
    if results:
        images = load_config(dataset, "images", columns=["image_id", "prompt_id", "model", "image_sha256"])
        for metric in metrics:
            if metric in scores:
                raise ScoresError(f"metric {metric!r} is both an uploaded file and a results metric: rename one")
            scores[metric] = pd.concat([scores_from_results(folder, images, metric, seed=seed) for folder in results],
                                       ignore_index=True)
    if not scores:
        raise ScoresError("no scores to meta-evaluate: give a scores file or results folders with metrics")
    return scores
