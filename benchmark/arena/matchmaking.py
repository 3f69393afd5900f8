"""Which battle the server issues next: the voter never chooses the models, the prompt or the sides.

**A model battle** (``model_battle``), drawn from the images of scored submissions (``candidates``: one row per
image, columns ``submission``, ``model`` (its name), ``prompt_id``, ``prompt``, ``culture`` (the one the prompt
names), ``image`` (a reference the app can serve)):

1. the culture: uniformly among the voter's cultures that prompts answered by two or more submissions name;
2. the pair: each pair of submissions that both answered a prompt naming that culture weighs
   ``(1 + overlap) / (1 + votes)``: overlap, the number of ranks their rank intervals in that culture's ranking
   share (the number of submissions, when the culture has no ranking yet or either has no interval: nothing is
   known of their order); votes, the votes already counted on the pair in that culture. The pair is drawn with
   probability proportional to its weight: the pairs whose order is least certain come most often, and no voter can
   predict which two they will be shown;
3. the prompt: uniformly among the prompts of that culture both answered; each one's image uniformly among its
   images of that prompt (its seeds);
4. the sides: a fair coin.

**A gold battle** (``gold_battle``), with probability ``GOLD_SHARE`` when the voter's cultures have reference
items (``gold``: one row per real image, columns ``name``, ``culture``, ``group`` (the concept or modality: items
are matched within one), ``image``, ``source``): an item of one of the voter's cultures, uniformly, named in the
prompt, its real image against the real image of an item of the same group from another culture; sides by a fair
coin; the right answer is the named item's side. ``benchmark.arena.reliability`` measures voters on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

GOLD_SHARE = 0.1  # the share of battles that are gold battles, where the voter's cultures have reference items
CANDIDATE_COLUMNS = ("submission", "model", "prompt_id", "prompt", "culture", "image")
GOLD_COLUMNS = ("name", "culture", "group", "image", "source")


@dataclass(frozen=True)
class BattleSpec:
    """A battle the server chose: what the voter is shown (the prompt, the culture it names, two images) and what
    stays hidden until the vote (which submissions, models or reference items made them; a gold battle's right
    side, ``gold_answer``)."""

    kind: str  # "model" or "gold" (``benchmark.arena.KINDS``)
    culture: str
    prompt_id: str
    prompt: str
    submission_a: str | None
    submission_b: str | None
    model_a: str
    model_b: str
    image_a: str
    image_b: str
    gold_answer: str | None = None


def pair_weights(submissions: list[str], intervals: pd.DataFrame | None, votes: pd.DataFrame) -> np.ndarray:
    """The weight ``(1 + overlap) / (1 + votes)`` of each pair of ``submissions`` (a square matrix, 0 on the
    diagonal): ``intervals`` (index: submission; ``rank_low``, ``rank_high``: a culture's ranking rows, or None),
    ``votes`` (that culture's counted votes: ``model_a``, ``model_b`` submission ids)."""
    n = len(submissions)
    overlap = np.full((n, n), float(n))
    if intervals is not None:
        rows = intervals.reindex(submissions)
        low = rows["rank_low"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        high = rows["rank_high"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        shared = np.minimum(high[:, None], high[None, :]) - np.maximum(low[:, None], low[None, :]) + 1
        overlap = np.where(np.isnan(shared), float(n), np.maximum(shared, 0.0))
    position = {s: i for i, s in enumerate(submissions)}
    counted = np.zeros((n, n))
    a, b = votes["model_a"].map(position), votes["model_b"].map(position)
    known = (a.notna() & b.notna()).to_numpy()
    np.add.at(counted, (a[known].astype(int).to_numpy(), b[known].astype(int).to_numpy()), 1)
    counted = counted + counted.T
    weights = (1 + overlap) / (1 + counted)
    np.fill_diagonal(weights, 0.0)
    return weights


def model_battle(candidates: pd.DataFrame, cultures: list[str], rankings: dict[str, pd.DataFrame],
                 votes: pd.DataFrame, rng: np.random.Generator) -> BattleSpec | None:
    """A model battle for a voter who knows ``cultures``, by the rule above; None when no culture of theirs has
    two submissions' images. ``rankings``: culture -> its ranking rows (``rating.Rating.rows``); ``votes``: the
    counted votes (``culture``, ``model_a``, ``model_b``: submission ids; ValueError without them)."""
    if missing := {"culture", "model_a", "model_b"} - set(votes.columns):
        raise ValueError(f"the counted votes the matchmaking reads need the columns {', '.join(sorted(missing))}")
    mine = candidates[candidates["culture"].isin(cultures)]
    open_cultures = sorted(c for c, part in mine.groupby("culture") if part["submission"].nunique() >= 2)
    if not open_cultures:
        return None
    culture = open_cultures[rng.integers(len(open_cultures))]
    part = mine[mine["culture"] == culture]
    submissions = sorted(part["submission"].unique())
    answered = pd.crosstab(part["prompt_id"], part["submission"]).reindex(columns=submissions).gt(0)
    both = answered.to_numpy(float).T @ answered.to_numpy(float) > 0  # submissions x submissions: a shared prompt
    weights = pair_weights(submissions, rankings.get(culture), votes[votes["culture"] == culture]) * both
    flat = weights.ravel() / weights.sum()
    i, j = divmod(int(rng.choice(flat.size, p=flat)), len(submissions))
    shared = answered.index[answered[submissions[i]] & answered[submissions[j]]]
    prompt_id = shared[rng.integers(len(shared))]
    picked = []
    for submission in (submissions[i], submissions[j]):
        images = part[(part["submission"] == submission) & (part["prompt_id"] == prompt_id)]
        picked.append(images.iloc[rng.integers(len(images))])
    if rng.random() < 0.5:
        picked.reverse()
    left, right = picked
    return BattleSpec("model", culture, str(prompt_id), str(left["prompt"]), str(left["submission"]),
                      str(right["submission"]), str(left["model"]), str(right["model"]), str(left["image"]),
                      str(right["image"]))


def gold_battle(gold: pd.DataFrame, cultures: list[str], rng: np.random.Generator) -> BattleSpec | None:
    """A gold battle for a voter who knows ``cultures``, by the rule above; None when none of their cultures has a
    reference item with an item of the same group from another culture."""
    elsewhere = {group: set(part["culture"]) for group, part in gold.groupby("group")}
    mine = gold[gold["culture"].isin(cultures)]
    usable = mine[[bool(elsewhere[g] - {c}) for g, c in zip(mine["group"], mine["culture"])]]
    if usable.empty:
        return None
    named = usable.iloc[rng.integers(len(usable))]
    others = gold[(gold["group"] == named["group"]) & (gold["culture"] != named["culture"])]
    other = others.iloc[rng.integers(len(others))]
    sides = [named, other] if rng.random() < 0.5 else [other, named]
    answer = "a" if sides[0] is named else "b"
    labels = [f"{item['source']}: {item['name']} ({item['culture']})" for item in sides]
    return BattleSpec("gold", str(named["culture"]), f"gold:{named['source']}:{named['name']}",
                      f"{named['name']} ({named['culture']})", None, None, labels[0], labels[1],
                      str(sides[0]["image"]), str(sides[1]["image"]), answer)


def next_battle(candidates: pd.DataFrame, gold: pd.DataFrame | None, cultures: list[str],
                rankings: dict[str, pd.DataFrame], votes: pd.DataFrame, rng: np.random.Generator,
                gold_share: float = GOLD_SHARE) -> BattleSpec | None:
    """The next battle for a voter who knows ``cultures``: a gold battle with probability ``gold_share`` (where
    their cultures have one), else a model battle; None when no model battle can be made for their cultures (gold
    battles only measure voters: they are not issued alone)."""
    spec = model_battle(candidates, cultures, rankings, votes, rng)
    if spec is not None and gold is not None and rng.random() < gold_share:
        return gold_battle(gold, cultures, rng) or spec
    return spec
