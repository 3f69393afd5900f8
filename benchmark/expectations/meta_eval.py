"""Meta-evaluation: does an automatic metric rank the CulturalFrames images as the human raters do?

Nayak et al., "CulturalFrames: Assessing Cultural Expectation Alignment in
Text-to-Image Models and Evaluation Metrics", arXiv:2506.08835, Sec. 6 and
Fig. 7: Spearman rank correlation between a metric's per-image score and the
raters' score, per criterion (alignment, quality, overall), next to the
human-human agreement. The paper does not say how its human-human value is
formed; here it is the leave-one-rater-out correlation (``leave_one_rater_out``:
each rater against the mean of the others), and a metric is set against the
same leave-one-out means (``leave_one_out_agreement``), so the two compare like
for like. Intervals come from a cluster bootstrap over prompts
(``prompt_resample_weights``): the four models' images of a prompt go together.

A metric's scores are a table (image_id, score) with higher = better (negate a
lower-is-better metric first): from an uploaded CSV/Parquet file
(``read_scores``) or from CultureLens per-image results of a submission made of
the CulturalFrames images themselves (``scores_from_results``). The output is a
ranking table of metrics: metric, criterion, country, spearman, ci_low, ci_high,
n, ceiling, rank; ``culturelens meta-eval`` adds each metric's version as its
results record it (``metric_versions``: a VLM judge's scores are worth what that
judge is worth), and the leaderboard shows a metric's pooled agreement beside its
ranking (``agreement``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from benchmark.datasets.culturalframes import canonical_model, load_config
from benchmark.errors import CultureLensError
from benchmark.layout import PER_IMAGE, RUN
from benchmark.run_record import RunRecord

CRITERIA = ("alignment", "quality", "overall")
ALL = "all"
MIN_IMAGES = 20
MIN_MODELS = 3  # fewest models a model-level order is compared on (with two, any order is +1 or -1)
RANKING_COLUMNS = ["metric", "criterion", "country", "spearman", "ci_low", "ci_high", "n", "ceiling", "model_spearman",
                   "models", "rank"]


class ScoresError(CultureLensError, ValueError):
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
    """Per image (index image_id): its prompt, its country, its model (when the ratings say) and the mean of its
    raters' scores per criterion."""
    missing = {"image_id", "prompt_id", "country", *CRITERIA} - set(ratings.columns)
    if missing:
        raise ValueError(f"ratings table has no column(s) {sorted(missing)}: pass the CulturalFrames ratings config")
    grouped = ratings.groupby("image_id", sort=True)
    about = ["prompt_id", "country", *(["model"] if "model" in ratings.columns else [])]
    return pd.concat([grouped[about].first(), grouped[list(CRITERIA)].mean()], axis=1)


def model_agreement(group: pd.DataFrame, criterion: str) -> tuple[float, int]:
    """How far a metric orders the models as the raters do: Spearman's rho between the models' mean metric score
    and their mean rater score on ``criterion`` over the same images (``group``: image rows with model, score and
    the criterion's rater mean), and the number of models; nan below ``MIN_MODELS`` models or without a model
    column. A ranking of models rests on this, which per-image agreement does not give: a metric can follow the
    raters image by image within each model and still reverse the models' order (CulturalFrames, arXiv:2506.08835,
    Sec. 6 correlates images only)."""
    if "model" not in group.columns:
        return float("nan"), 0
    means = group.groupby("model")[["score", criterion]].mean()
    if len(means) < MIN_MODELS:
        return float("nan"), len(means)
    return float(stats.spearmanr(means["score"], means[criterion]).statistic), len(means)


def _weighted_ranks(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Average ranks of ``x`` (n values) in each resample of ``weights`` (b x n), where image i appears
    ``weights[j, i]`` times in resample j: the rank of value v is (count below v) + (count equal to v + 1) / 2,
    as ``scipy.stats.rankdata`` gives on the expanded sample. Images of weight 0 get a rank that is never used."""
    order = np.argsort(x, kind="stable")
    new_value = np.r_[True, x[order][1:] != x[order][:-1]]
    tie_weight = np.add.reduceat(weights[:, order], np.flatnonzero(new_value), axis=1)
    group_rank = np.cumsum(tie_weight, axis=1) - tie_weight + (tie_weight + 1) / 2
    ranks = np.empty(weights.shape)
    ranks[:, order] = group_rank[:, np.cumsum(new_value) - 1]
    return ranks


def weighted_spearman(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman's rho of each resample (row of ``weights``, b x n: how often each of the n pairs is drawn), i.e.
    ``scipy.stats.spearmanr`` of the pairs repeated that often: the weighted Pearson correlation of the weighted
    average ranks (``_weighted_ranks``). nan where a side is constant in the resample."""
    x, y, weights = np.asarray(x, float), np.asarray(y, float), np.atleast_2d(np.asarray(weights, float))
    rx, ry = _weighted_ranks(x, weights), _weighted_ranks(y, weights)
    total = weights.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):  # an empty or constant resample: nan
        rx = rx - (weights * rx).sum(axis=1, keepdims=True) / total
        ry = ry - (weights * ry).sum(axis=1, keepdims=True) / total
        return (weights * rx * ry).sum(axis=1) / np.sqrt((weights * rx**2).sum(axis=1) * (weights * ry**2).sum(axis=1))


def prompt_resample_weights(prompts: Sequence, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Cluster bootstrap over prompts (n_resamples x n images): each resample draws as many prompts as there are,
    with replacement, and takes every image of a drawn prompt as often as the prompt is drawn.

    CulturalFrames (Nayak et al., arXiv:2506.08835, Sec. 3) has each prompt rendered by the same four models, so
    the images of a prompt are not independent (they share the prompt's difficulty); resampling images treats them
    as independent and gives too narrow intervals. Resampling the clusters (prompts) is the cluster bootstrap
    (Davison & Hinkley 1997, Sec. 3.8; Field & Welsh 2007)."""
    codes, _ = pd.factorize(np.asarray(prompts))
    n_prompts = codes.max() + 1
    drawn = rng.integers(0, n_prompts, size=(n_resamples, n_prompts))
    counts = np.zeros((n_resamples, n_prompts))
    np.add.at(counts, (np.arange(n_resamples)[:, None], drawn), 1)
    return counts[:, codes]


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


def rater_matrix(ratings: pd.DataFrame, criterion: str, image_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Images (index image_id, sorted) x rater slots (``rater_slots``): each rating's score for ``criterion``;
    NaN where an image has no rating in a slot or the rating has no score."""
    table = ratings.loc[ratings[criterion].notna(), ["image_id", criterion]]
    if image_ids is not None:
        table = table[table["image_id"].isin(set(image_ids))]
    table = table.assign(slot=rater_slots(ratings).loc[table.index])
    return table.pivot_table(index="image_id", columns="slot", values=criterion, aggfunc="first").sort_index()


def _others_means(matrix: np.ndarray) -> np.ndarray:
    """Images x slots: in column k, the mean of each image's ratings other than slot k (NaN if there is none)."""
    count = np.isfinite(matrix).sum(axis=1, keepdims=True) - np.isfinite(matrix)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.nansum(matrix, axis=1, keepdims=True) - np.nan_to_num(matrix)) / np.where(count > 0, count, np.nan)


def leave_one_out_agreement(values: np.ndarray, matrix: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Mean over rater slots k of Spearman(values[:, k], mean of the other raters' scores), per resample.

    ``matrix``: images x slots (``rater_matrix``). ``values``: images x slots, what is set against slot k's
    target in column k: the matrix itself for the human ceiling (rater k against the others), a metric's score
    repeated in every column for the metric (the metric against the same others). Both are then correlated with
    the same targets, a mean of the same number of raters, so a metric that behaves like one more rater scores
    the ceiling in expectation (Nayak et al., arXiv:2506.08835, Sec. 6, Fig. 7 set metrics beside a human-human
    correlation; this is one like-for-like way of forming both). Slot k uses the images where column k and its
    target exist; a slot counts if it has at least three such images and its rho is defined (neither side
    constant); the mean is over counted slots, nan if none. ``weights`` (b x images, ``prompt_resample_weights``)
    gives b resampled values; without it one value (the data as they are)."""
    targets = _others_means(matrix)
    weights = np.ones((1, len(matrix))) if weights is None else weights
    rhos = np.full((len(weights), matrix.shape[1]), np.nan)
    for k in range(matrix.shape[1]):
        rows = np.isfinite(values[:, k]) & np.isfinite(targets[:, k])
        if rows.sum() >= 3:
            rhos[:, k] = weighted_spearman(values[rows, k], targets[rows, k], weights[:, rows])
    counted = np.isfinite(rhos)
    with np.errstate(invalid="ignore"):
        return np.where(counted, rhos, 0).sum(axis=1) / np.where(counted.any(axis=1), counted.sum(axis=1), np.nan)


def leave_one_rater_out(ratings: pd.DataFrame, criterion: str, image_ids: Iterable[str] | None = None) -> float:
    """Human-human ceiling of a criterion: how well one rater's scores rank images like the other raters.

    For each rater slot k (``rater_slots``): x_k(i) is the score of the rating in
    slot k of image i and y_k(i) the mean score of the other ratings of image i;
    rho_k = Spearman(x_k, y_k) over the images that have slot k and at least one
    other rating. ceiling = mean of rho_k over the slots where rho_k is defined
    (at least three images, neither side constant): ``leave_one_out_agreement``
    of the rater matrix with itself. With the release's three raters per image,
    slots 0, 1 and 2 each cover every image. ``meta_evaluate`` sets each metric
    against the same y_k.

    Raters who agree perfectly give 1 (given that images differ); raters who are
    independent noise give about 0. nan if no slot has a defined rho.
    """
    matrix = rater_matrix(ratings, criterion, image_ids).to_numpy(float)
    return float(leave_one_out_agreement(matrix, matrix)[0])


def metric_agreement_ci(score: np.ndarray, matrix: np.ndarray, prompts: Sequence, *, confidence: float = 0.95,
                        n_resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """A metric's like-for-like agreement with the raters and its percentile cluster-bootstrap CI over prompts.

    ``score``: the metric per image, in the rows of ``matrix`` (``rater_matrix``); ``prompts``: each image's
    prompt. The value is ``leave_one_out_agreement`` of the score (repeated per slot) with the matrix; the CI
    recomputes it on ``prompt_resample_weights`` resamples (the same images in, all slots resampled together).
    Resamples with no defined value are left out of the percentiles; low/high are nan if none is left."""
    values = np.repeat(np.asarray(score, float)[:, None], matrix.shape[1], axis=1)
    rho = float(leave_one_out_agreement(values, matrix)[0])
    if np.isnan(rho):
        return rho, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = np.concatenate([leave_one_out_agreement(values, matrix,
                                                    prompt_resample_weights(prompts, min(250, n_resamples - start), rng))
                            for start in range(0, n_resamples, 250)])  # batches keep memory at 250 x n
    draws = draws[np.isfinite(draws)]
    if not draws.size:
        return rho, float("nan"), float("nan")
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return rho, float(low), float(high)


def meta_evaluate(scores: Mapping[str, pd.DataFrame], ratings: pd.DataFrame, *, criteria: Iterable[str] = CRITERIA,
                  by_country: bool = True, min_images: int = MIN_IMAGES, confidence: float = 0.95,
                  n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Ranking table of metrics by their like-for-like Spearman correlation with the raters.

    ``scores``: metric name -> its (image_id, score) table (checked with ``read_scores``). For each metric,
    criterion and country (``"all"``, then each country when ``by_country``), on the images the metric scored:
    ``ceiling`` is the human-human leave-one-rater-out correlation (``leave_one_rater_out``: each rater k against
    the mean of the other raters, averaged over k) and ``spearman`` the metric against the same leave-one-out
    means, averaged the same way (``leave_one_out_agreement``), so that a metric as good as one more rater scores
    the ceiling (a correlation with the mean of all raters would give it more: a mean of more raters is less
    noisy). ``ci_low``/``ci_high``: percentile CI of ``spearman`` from a cluster bootstrap over prompts
    (``metric_agreement_ci``), because the four CulturalFrames models share prompts (Nayak et al.,
    arXiv:2506.08835, Sec. 3). ``n``: images. ``model_spearman`` and ``models``: the models' order by the metric
    against theirs by the raters (``model_agreement``; the ratings' ``model`` column). Groups with fewer than
    ``min_images`` rated images are left out.
    ``rank`` is 1 for the highest spearman within a (criterion, country).
    """
    means = human_means(ratings)
    rows, matrices = [], {}
    for metric, table in scores.items():
        checked = read_scores(table, means.index, min_images=min_images, name=metric)
        joined = checked.join(means, on="image_id")
        for criterion in criteria:
            if criterion not in CRITERIA:
                raise ValueError(f"criterion {criterion!r} is not one of {CRITERIA}")
            if criterion not in matrices:
                matrices[criterion] = rater_matrix(ratings, criterion)
            rated = joined.dropna(subset=[criterion])
            groups = [(ALL, rated)] + (sorted(rated.groupby("country"), key=lambda g: g[0]) if by_country else [])
            for country, group in groups:
                if len(group) < min_images:
                    continue
                matrix = matrices[criterion].loc[group["image_id"]].to_numpy(float)
                rho, low, high = metric_agreement_ci(group["score"].to_numpy(), matrix, group["prompt_id"].to_numpy(),
                                                     confidence=confidence, n_resamples=n_resamples, seed=seed)
                model_rho, models = model_agreement(group, criterion)
                rows.append({"metric": metric, "criterion": criterion, "country": country, "spearman": rho,
                             "ci_low": low, "ci_high": high, "n": len(group),
                             "ceiling": float(leave_one_out_agreement(matrix, matrix)[0]),
                             "model_spearman": model_rho, "models": models})
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
    path = path / PER_IMAGE if path.is_dir() else path
    if not path.is_file():
        raise ScoresError(f"{path}: no per-image results (a results folder has per_image.parquet)")
    return pd.read_parquet(path)


def scores_from_results(per_image: str | Path | pd.DataFrame, images: pd.DataFrame, metric: str, *,
                        model: str | None = None, seed: int | None = None) -> pd.DataFrame:
    """One metric's per-image values of a CultureLens results table, keyed by CulturalFrames image id.

    Join key: (prompt_id, model). A CulturalFrames image is the one image of a
    prompt by a model, and a submission made of those images (see
    ``benchmark.expectations.rated_images.export_submission``) keeps the dataset's
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


def metric_versions(results: Sequence[str | Path], metrics: Sequence[str]) -> dict[str, str]:
    """Metric -> its version as the ``run.json`` of the results folders records it ("" where none records one).
    ScoresError if two folders scored a metric under different versions (e.g. two judges): their values do not
    belong in one correlation."""
    versions: dict[str, set[str]] = {metric: set() for metric in metrics}
    for folder in results:
        path = Path(folder) / RUN if Path(folder).is_dir() else Path(folder).with_name(RUN)
        run = RunRecord.parse(path.read_bytes()) if path.is_file() else None
        recorded = (run.metrics if run is not None else None) or {}
        for metric in metrics:
            if metric in recorded:
                versions[metric].add(recorded[metric])
    mixed = {metric: sorted(found) for metric, found in versions.items() if len(found) > 1}
    if mixed:
        metric, found = next(iter(mixed.items()))
        raise ScoresError(f"{metric}: the results folders were scored under different versions ({'; '.join(found)}); "
                          "meta-evaluate the folders of one version at a time")
    return {metric: next(iter(found), "") for metric, found in versions.items()}


def agreement(table: pd.DataFrame, metric: str, criterion: str = "alignment", version: str | None = None
              ) -> dict | None:
    """The row of a ranking table (``meta_evaluate``'s, or the store's with provenance) that says how far
    ``metric`` agrees with the raters on ``criterion`` over every country (``ALL``), computed here rather than
    reported, for the metric ``version`` when given (a judge's agreement is that judge's: another judge, or
    another revision of it, says nothing of it); None if there is none. With several (re-runs), the one over the
    most images."""
    rows = table[(table["metric"] == metric) & (table["criterion"] == criterion) & (table["country"] == ALL)]
    if "provenance" in rows:
        rows = rows[rows["provenance"] == "scored"]
    if version is not None:
        rows = rows[rows["metric_version"] == version] if "metric_version" in rows else rows.iloc[0:0]
    if rows.empty:
        return None
    return rows.sort_values("n", ascending=False, kind="stable").iloc[0].to_dict()
