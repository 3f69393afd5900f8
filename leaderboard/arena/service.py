"""The Cultural Arena as the app calls it: everything below the tab (issue 53). A signed-in visitor says which
cultures they know, is issued one battle at a time by the server, votes, sees the models revealed, and may withdraw
their votes for good; the rankings and each metric's agreement are derived from the stored votes::

    arena = Arena(store.queue, seal.keys_for(store.root), candidates)   # candidates: matchmaking.CANDIDATE_COLUMNS
    arena.set_cultures(user, ["Japan", "India"])        # user: the sign-in name (never stored: a keyed hash is)
    shown = arena.next_battle(user)                     # Shown: token, prompt, culture, image_a/b references
    reveal = arena.vote(user, shown.token, "a", ["stereotype"])   # Reveal: both models, and a gold battle's answer
    arena.withdraw(user)                                # every vote of theirs, for good
    standings = arena.standings()                       # Standings: voters set aside and why, rankings, votes
    arena.agreement(values, scores)                     # a metric against the votes (values: image -> value)

``user`` is the name the app's sign-in gives (a Hugging Face account on a Space, the operator's sign-in elsewhere):
the app passes it, never a name the visitor types. Images are named by the references ``candidates`` and the gold
items carry (the app serves them, re-encoded, under names that do not tell the model). Every refusal is a
``VoteRefused`` or ``TokenRefused`` whose message is a sentence for the voter.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmark.arena import agreement, matchmaking, rating, reliability
from benchmark.settings import SettingError
from leaderboard.arena.ballots import Ballots, Battle, VoteRefused
from leaderboard.arena.tokens import battle_token, token_battle, voter_hashes
from leaderboard.queue import Queue
from leaderboard.seal import Keys

MAX_CULTURES = 50  # cultures one voter may say they know
STANDINGS_SECONDS = 60.0  # the rankings the matchmaking reads are at most this old


@dataclass(frozen=True)
class ArenaSettings:
    """The rules an operator sets (``operator_settings.ARENA``): ``daily_votes`` per voter per 24 h, the largest
    ``voter_share`` of a ranking one voter may weigh, the most one voter may weigh in the median voter's votes of a
    ranking (``voter_multiple``, ``rating.voter_weights``), how long a battle stays open (``battle_minutes``), the
    share of battles that are gold battles and the folder of the relevance knowledge base's images (``kb_images``:
    gold items of CUBE-CSpace's artifacts, ``served.gold``)."""

    daily_votes: int = 200
    voter_share: float = rating.VOTER_SHARE
    battle_minutes: float = 30.0
    gold_share: float = matchmaking.GOLD_SHARE
    voter_multiple: float = rating.MEDIAN_MULTIPLE
    kb_images: str | None = None

    def __post_init__(self):
        if self.daily_votes < 1 or not 0 < self.voter_share <= 1 or self.battle_minutes <= 0 \
                or not 0 <= self.gold_share < 1:
            raise SettingError(f"arena settings out of range: daily votes {self.daily_votes} (at least 1), voter share "
                               f"{self.voter_share} (above 0, at most 1), battle minutes {self.battle_minutes} (above "
                               f"0), gold share {self.gold_share} (0 to below 1)")
        if not self.voter_multiple >= 1:  # nan too
            raise SettingError(f"The arena's voter multiple is {self.voter_multiple}: set "
                               "CULTURELENS_ARENA_VOTER_MULTIPLE to a number of at least 1, the most one voter may "
                               "weigh in the median voter's votes (inf: no such cap).")

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None) -> ArenaSettings:
        """From the environment (``CULTURELENS_ARENA_*``), else the defaults."""
        from leaderboard.operator_settings import (ARENA_BATTLE_MINUTES, ARENA_DAILY_VOTES, ARENA_KB_IMAGES,
                                                   ARENA_VOTER_MULTIPLE, ARENA_VOTER_SHARE)

        return cls(daily_votes=ARENA_DAILY_VOTES.resolve(None, environ),
                   voter_share=ARENA_VOTER_SHARE.resolve(None, environ),
                   battle_minutes=ARENA_BATTLE_MINUTES.resolve(None, environ),
                   voter_multiple=ARENA_VOTER_MULTIPLE.resolve(None, environ),
                   kb_images=ARENA_KB_IMAGES.resolve(None, environ))


@dataclass(frozen=True)
class Shown:
    """What a voter is shown of a battle: no model, no submission, no answer. ``token``: what their vote carries."""

    battle: str
    token: str
    culture: str
    prompt: str
    image_a: str  # left
    image_b: str  # right
    expires_at: float  # seconds since the epoch, by the database's clock


@dataclass(frozen=True)
class Reveal:
    """What a voter sees after their vote: the models (or reference items) behind each side, their vote and, on a
    gold battle, the right side."""

    model_a: str
    model_b: str
    outcome: str
    reasons: tuple[str, ...]
    gold_answer: str | None


@dataclass
class Standings:
    """Everything derived from the votes at one time: ``votes`` (every vote, ``set_aside`` and ``reason`` marked),
    ``voters`` (each voter's record and standing, ``reliability.reliability``), ``rankings`` (``rating.OVERALL`` and
    each culture -> ``rating.Rating``, its rows indexed by submission with the model's name in ``model``)."""

    votes: pd.DataFrame
    voters: pd.DataFrame
    rankings: dict[str, rating.Rating]
    at: float


class Arena:
    """The arena over the queue's database ``queue``, signing with ``keys``, issuing battles between the images of
    ``candidates`` (``matchmaking.CANDIDATE_COLUMNS``; replace the attribute when the scored submissions change) and
    gold battles from ``gold`` (``matchmaking.GOLD_COLUMNS``; ``benchmark.arena.gold``), by ``settings``."""

    def __init__(self, queue: Queue, keys: Keys, candidates: pd.DataFrame, gold: pd.DataFrame | None = None,
                 settings: ArenaSettings = ArenaSettings(), *,
                 rng: Callable[[], np.random.Generator] = np.random.default_rng,
                 replicates: int = rating.REPLICATES):
        """``rng``: a fresh generator for each draw (default: from the system's entropy, so no voter can predict a
        battle); ``replicates``: bootstrap draws of each ranking."""
        missing = set(matchmaking.CANDIDATE_COLUMNS) - set(candidates.columns)
        if missing:
            raise ValueError(f"the arena's candidates need the columns {', '.join(sorted(missing))}")
        self.ballots = Ballots(queue)
        self.keys, self.candidates, self.gold, self.settings = keys, candidates, gold, settings
        self.rng, self.replicates = rng, replicates
        self._standings: Standings | None = None
        self._lock = threading.Lock()

    # --- voters ------------------------------------------------------------------------------------------------
    def voter(self, user: str) -> str:
        """The keyed hash ``user`` (a sign-in name) votes under; a voter hashed under an earlier seal key is moved to
        the current one."""
        if not isinstance(user, str) or not user.strip():
            raise VoteRefused("Sign in to vote in the arena.")
        current, *earlier = voter_hashes(self.keys, user)
        if earlier and not self.ballots.known([current]):
            for old in self.ballots.known(earlier):
                self.ballots.rekey(old, current)
        return current

    def offered(self) -> list[str]:
        """The cultures a voter can say they know: those the candidates' prompts name."""
        return sorted(set(self.candidates["culture"].dropna().astype(str)))

    def set_cultures(self, user: str, cultures: list[str]) -> list[str]:
        """Record the cultures ``user`` knows well (changeable); VoteRefused for none, too many, or one the arena
        does not offer."""
        if not isinstance(cultures, (list, tuple)) or not cultures:
            raise VoteRefused("Choose at least one culture you know well.")
        if len(cultures) > MAX_CULTURES:
            raise VoteRefused(f"Choose at most {MAX_CULTURES} cultures, those you know well.")
        offered = set(self.offered())
        if unknown := [c for c in cultures if c not in offered]:
            raise VoteRefused(f"The arena has no battles for {str(unknown[0])[:60]!r}: choose among the cultures it "
                              "lists.")
        self.ballots.set_cultures(self.voter(user), list(cultures))
        return sorted(set(cultures))

    def cultures(self, user: str) -> list[str] | None:
        return self.ballots.cultures(self.voter(user))

    # --- battles and votes ----------------------------------------------------------------------------------------
    def next_battle(self, user: str) -> Shown:
        """The battle ``user`` holds open, else a new one the server draws (``matchmaking.next_battle``) for the
        cultures they said they know; VoteRefused when they have said none, or no battle can be made for them."""
        voter = self.voter(user)
        held = self.ballots.open_battle(voter)
        if held is None:
            cultures = self.ballots.cultures(voter)
            if not cultures:
                raise VoteRefused("Say first which cultures you know well: the arena shows you prompts naming them.")
            standings = self.standings(max_age=STANDINGS_SECONDS)
            counted = standings.votes[(standings.votes["kind"] == "model") & ~standings.votes["set_aside"]]
            ranked = {c: r.rows for c, r in standings.rankings.items() if not r.not_ranked}
            spec = matchmaking.next_battle(
                self.candidates, self.gold, cultures, ranked,
                counted.rename(columns={"model_a": "name_a", "model_b": "name_b", "submission_a": "model_a",
                                        "submission_b": "model_b"}), self.rng(), self.settings.gold_share)
            if spec is None:
                raise VoteRefused("No two scored models have answered a prompt naming your cultures yet: add a "
                                  "culture, or come back when more models are scored.")
            held = self.ballots.issue(voter, spec, seconds=self.settings.battle_minutes * 60,
                                      daily_votes=self.settings.daily_votes)
        return self._shown(held)

    def _shown(self, battle: Battle) -> Shown:
        return Shown(battle.battle, battle_token(self.keys, battle.battle, battle.voter), battle.culture,
                     battle.prompt, battle.image_a, battle.image_b, battle.expires_at)

    def vote(self, user: str, token: str, outcome: str, reasons: list[str] = ()) -> Reveal:
        """``user``'s vote on the battle ``token`` names: ``outcome`` one of ``benchmark.arena.OUTCOMES`` (a: left),
        ``reasons`` of ``benchmark.arena.REASONS``. TokenRefused for a token this server did not sign for this voter;
        VoteRefused for a second vote, an expired battle, one past the daily cap (``Ballots.cast``)."""
        voter = self.voter(user)
        reasons = list(reasons) if isinstance(reasons, (list, tuple)) else [reasons]
        battle = self.ballots.cast(token_battle(self.keys, token, voter), voter, outcome, reasons,
                                   daily_votes=self.settings.daily_votes)
        return Reveal(battle.model_a, battle.model_b, battle.outcome, battle.reasons, battle.gold_answer)

    def skip(self, user: str, token: str) -> bool:
        """Close ``user``'s open battle without a vote (they cannot judge it)."""
        voter = self.voter(user)
        return self.ballots.skip(token_battle(self.keys, token, voter), voter)

    def withdraw(self, user: str) -> int:
        """Withdraw every vote of ``user`` for good (``Ballots.withdraw``); returns how many."""
        withdrawn = self.ballots.withdraw(self.voter(user))
        with self._lock:
            self._standings = None
        return withdrawn

    # --- what the votes say -------------------------------------------------------------------------------------
    def standings(self, max_age: float = 0.0) -> Standings:
        """The votes, the voters' standing and the rankings, computed now, or kept from at most ``max_age`` seconds
        ago (the matchmaking's: the rankings cost a bootstrap)."""
        with self._lock:
            if self._standings is not None and time.monotonic() - self._standings.at <= max_age:
                return self._standings
            votes = self.ballots.votes()
            voters = reliability.reliability(votes)
            marked = reliability.marked(votes, voters)
            counted = marked[(marked["kind"] == "model") & ~marked["set_aside"]]
            names = dict(zip(counted["submission_a"], counted["model_a"])) | dict(
                zip(counted["submission_b"], counted["model_b"]))
            ratings = rating.ratings(counted[["culture", "voter", "outcome"]].assign(
                model_a=counted["submission_a"], model_b=counted["submission_b"]),
                share=self.settings.voter_share, multiple=self.settings.voter_multiple,
                replicates=self.replicates)
            for found in ratings.values():
                found.rows.insert(0, "model", found.rows.index.map(names))
            self._standings = Standings(marked, voters, ratings, time.monotonic())
            return self._standings

    def agreement(self, values: pd.Series, scores: pd.Series | None = None, *,
                  higher_is_better: bool = True) -> tuple[pd.DataFrame, dict[str, dict]]:
        """An automatic metric against the votes: ``values`` (image reference -> the metric's value of that image)
        gives its pairwise agreement on the decided model battles counted (``agreement.pair_agreement``, per
        culture), ``scores`` (submission -> its score) its rank correlation with each ranking's strengths
        (``agreement.rank_correlation``, by ranking name)."""
        standings = self.standings()
        votes = standings.votes
        decided = votes[(votes["kind"] == "model") & ~votes["set_aside"] & votes["outcome"].isin(("a", "b"))]
        pairs = pd.DataFrame({"culture": decided["culture"], "outcome": decided["outcome"],
                              "value_a": decided["image_a"].map(values), "value_b": decided["image_b"].map(values)})
        correlations = {}
        if scores is not None:
            correlations = {name: agreement.rank_correlation(found.rows["strength"], scores,
                                                             higher_is_better=higher_is_better)
                            for name, found in standings.rankings.items() if not found.not_ranked}
        return agreement.pair_agreement(pairs, higher_is_better=higher_is_better), correlations
