"""Arena votes as data, in the queue's database (``leaderboard.queue``: one SQLite file or a PostgreSQL server, the
same SQL on both): voters, the battles issued to them, their votes and their withdrawals; every rule that keeps a
vote honest is checked in the transaction that writes it.

Tables (beside the queue's; times are seconds since the epoch by the database's clock, ``DB_NOW``, as leases are):

- ``arena_voters``: ``voter`` (a keyed hash of the sign-in name, ``tokens.voter_hash``; never the name), ``cultures``
  (a JSON list of the countries they know, changeable), ``updated_at``;
- ``arena_battles``: ``battle`` (128 random bits), the ``voter`` it was issued to, ``kind`` (model or gold),
  ``culture``, ``prompt_id``, ``prompt``, the two sides' ``submission_a/b``, ``model_a/b`` and ``image_a/b`` (a is
  shown on the left), a gold battle's ``gold_answer``, ``issued_at``, ``expires_at``, ``closed`` (NULL while open,
  then "voted" or "skipped");
- ``arena_votes``: ``battle`` (the primary key: one vote per battle), ``voter``, ``outcome``, ``reasons`` (a JSON
  list), ``voted_at``;
- ``arena_withdrawals``: ``battle_hash`` (the sha256 of a withdrawn battle's id), ``at``: what no restore may bring
  back (``leaderboard.arena.publish``).

The rules (``cast``, ``issue``), each a sentence when refused (``VoteRefused``): a battle is voted on once, only by
the voter it was issued to, before it expires, and not past that voter's daily cap (votes in the last 24 h, counted
in the transaction that inserts, one voter's transactions taking turns, so racing votes cannot all pass it); a voter
holds one open battle at a time and is issued at most ``ISSUES_PER_VOTE`` times their daily cap of battles a day. The
battle's token (``tokens``) is checked by the caller before any of this. A withdrawal deletes every vote and battle
of the voter and keeps only the sha256 of each battle id.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, fields

import pandas as pd

from benchmark.arena import KINDS, OUTCOMES, REASONS
from benchmark.arena.matchmaking import BattleSpec
from benchmark.errors import CultureLensError
from leaderboard.queue import Queue

DAY = 86400.0
ISSUES_PER_VOTE = 3  # battles a voter may be issued per vote of their daily cap (skipped and expired ones count)
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS arena_voters (
        voter TEXT PRIMARY KEY,
        cultures TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL)""",
    f"""CREATE TABLE IF NOT EXISTS arena_battles (
        battle TEXT PRIMARY KEY,
        voter TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ({", ".join(f"'{k}'" for k in KINDS)})),
        culture TEXT NOT NULL,
        prompt_id TEXT NOT NULL,
        prompt TEXT NOT NULL,
        submission_a TEXT,
        submission_b TEXT,
        model_a TEXT NOT NULL,
        model_b TEXT NOT NULL,
        image_a TEXT NOT NULL,
        image_b TEXT NOT NULL,
        gold_answer TEXT,
        issued_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        closed TEXT CHECK (closed IN ('voted', 'skipped')))""",
    "CREATE INDEX IF NOT EXISTS arena_battles_by_voter ON arena_battles (voter, issued_at)",
    f"""CREATE TABLE IF NOT EXISTS arena_votes (
        battle TEXT PRIMARY KEY,
        voter TEXT NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ({", ".join(f"'{o}'" for o in OUTCOMES)})),
        reasons TEXT NOT NULL,
        voted_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS arena_votes_by_voter ON arena_votes (voter, voted_at)",
    """CREATE TABLE IF NOT EXISTS arena_withdrawals (
        battle_hash TEXT PRIMARY KEY,
        at DOUBLE PRECISION NOT NULL)""",
)
BATTLE_FIELDS = ("battle", "voter", "kind", "culture", "prompt_id", "prompt", "submission_a", "submission_b",
                 "model_a", "model_b", "image_a", "image_b", "gold_answer", "issued_at", "expires_at")


class VoteRefused(CultureLensError):
    """A vote (or a request for a battle) the arena's rules refuse; the message is a sentence for the voter."""


def battle_hash(battle: str) -> str:
    """What a withdrawal keeps of a battle: the sha256 of its id."""
    return hashlib.sha256(battle.encode()).hexdigest()


@dataclass(frozen=True)
class Battle:
    """A battle as stored, with its vote once cast (``outcome`` None before)."""

    battle: str
    voter: str
    kind: str
    culture: str
    prompt_id: str
    prompt: str
    submission_a: str | None
    submission_b: str | None
    model_a: str
    model_b: str
    image_a: str
    image_b: str
    gold_answer: str | None
    issued_at: float
    expires_at: float
    closed: str | None = None
    outcome: str | None = None
    reasons: tuple[str, ...] = ()
    voted_at: float | None = None

    @classmethod
    def of(cls, row: dict) -> Battle:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in row.items() if k in names}
        values["reasons"] = tuple(json.loads(row["reasons"])) if row.get("reasons") else ()
        return cls(**values)


_BATTLE_SELECT = ("SELECT b.*, v.outcome, v.reasons, v.voted_at FROM arena_battles b "
                  "LEFT JOIN arena_votes v ON v.battle = b.battle")


class Ballots:
    """The arena's tables in ``queue``'s database (made when missing): safe from many threads and processes, as the
    queue is."""

    def __init__(self, queue: Queue):
        self.queue = queue
        with queue._transaction("culturelens arena schema") as db:
            for statement in _SCHEMA:
                db.execute(statement)

    # --- voters --------------------------------------------------------------------------------------------------
    def set_cultures(self, voter: str, cultures: list[str]) -> None:
        """Record the cultures ``voter`` knows well (replacing what they said before)."""
        with self.queue._transaction(voter) as db:
            db.execute("INSERT INTO arena_voters (voter, cultures, updated_at) VALUES (?, ?, DB_NOW) ON CONFLICT"
                       " (voter) DO UPDATE SET cultures = excluded.cultures, updated_at = excluded.updated_at",
                       (voter, json.dumps(sorted(set(cultures)), ensure_ascii=False)))

    def cultures(self, voter: str) -> list[str] | None:
        """The cultures ``voter`` said they know, or None when they have not said."""
        with self.queue._connect() as db:
            row = db.execute("SELECT cultures FROM arena_voters WHERE voter = ?", (voter,)).fetchone()
        return None if row is None else json.loads(row["cultures"])

    def known(self, voters: list[str]) -> list[str]:
        """Those of ``voters`` the arena has any record of."""
        with self.queue._connect() as db:
            found = set()
            for voter in voters:
                if db.execute("SELECT 1 AS one FROM arena_voters WHERE voter = ? UNION ALL SELECT 1 AS one FROM"
                              " arena_battles WHERE voter = ?", (voter, voter)).fetchone():
                    found.add(voter)
        return [voter for voter in voters if voter in found]

    def rekey(self, old: str, new: str) -> None:
        """Move everything of the voter hashed ``old`` (under an earlier seal key) to ``new``."""
        with self.queue._transaction(new) as db:
            if db.execute("SELECT 1 AS one FROM arena_voters WHERE voter = ?", (new,)).fetchone():
                db.execute("DELETE FROM arena_voters WHERE voter = ?", (old,))
            else:
                db.execute("UPDATE arena_voters SET voter = ? WHERE voter = ?", (new, old))
            for table in ("arena_battles", "arena_votes"):
                db.execute(f"UPDATE {table} SET voter = ? WHERE voter = ?", (new, old))

    # --- battles ---------------------------------------------------------------------------------------------------
    def open_battle(self, voter: str) -> Battle | None:
        """The battle ``voter`` holds open (issued, not voted, skipped or expired), if any."""
        with self.queue._connect() as db:
            row = db.execute(_BATTLE_SELECT + " WHERE b.voter = ? AND b.closed IS NULL AND b.expires_at > DB_NOW"
                             " ORDER BY b.issued_at DESC LIMIT 1", (voter,)).fetchone()
        return None if row is None else Battle.of(row)

    def battle(self, battle: str) -> Battle | None:
        with self.queue._connect() as db:
            row = db.execute(_BATTLE_SELECT + " WHERE b.battle = ?", (battle,)).fetchone()
        return None if row is None else Battle.of(row)

    def issue(self, voter: str, spec: BattleSpec, *, seconds: float, daily_votes: int) -> Battle:
        """Issue ``spec`` to ``voter``, open for ``seconds``: their open battle instead when they hold one (one at a
        time); VoteRefused past ``ISSUES_PER_VOTE`` x ``daily_votes`` battles in 24 h."""
        battle = secrets.token_hex(16)
        with self.queue._transaction(voter) as db:
            row = db.execute(_BATTLE_SELECT + " WHERE b.voter = ? AND b.closed IS NULL AND b.expires_at > DB_NOW"
                             " ORDER BY b.issued_at DESC LIMIT 1", (voter,)).fetchone()
            if row is not None:
                return Battle.of(row)
            issued = db.execute("SELECT count(*) AS n FROM arena_battles WHERE voter = ? AND issued_at > DB_NOW - ?",
                                (voter, DAY)).fetchone()["n"]
            if issued >= ISSUES_PER_VOTE * daily_votes:
                raise VoteRefused(f"You have been shown {issued} battles in the last 24 hours, the most the arena "
                                  "issues to one voter in a day: come back tomorrow.")
            # Expired battles nobody voted on, of more than a day ago, say nothing: they go.
            db.execute("DELETE FROM arena_battles WHERE voter = ? AND closed IS NULL AND expires_at < DB_NOW - ?",
                       (voter, DAY))
            values = {**{f: getattr(spec, f) for f in BATTLE_FIELDS if hasattr(spec, f)}, "battle": battle,
                      "voter": voter}
            names = [f for f in BATTLE_FIELDS if f in values]
            db.execute(f"INSERT INTO arena_battles ({', '.join(names)}, issued_at, expires_at) VALUES "
                       f"({', '.join('?' * len(names))}, DB_NOW, DB_NOW + ?)", (*(values[n] for n in names), seconds))
        return self.battle(battle)

    def skip(self, battle: str, voter: str) -> bool:
        """Close ``voter``'s open ``battle`` without a vote (they may not judge it); False when it is not theirs and
        open."""
        with self.queue._transaction(voter) as db:
            cursor = db.execute("UPDATE arena_battles SET closed = 'skipped' WHERE battle = ? AND voter = ? AND closed"
                                " IS NULL", (battle, voter))
        return cursor.rowcount == 1

    # --- votes -------------------------------------------------------------------------------------------------------
    def cast(self, battle: str, voter: str, outcome: str, reasons: list[str], *, daily_votes: int) -> Battle:
        """Record ``voter``'s vote on ``battle``; VoteRefused, saying why, for an unknown or withdrawn battle, one
        issued to another voter, one already voted on or skipped, one past its expiry, or a vote past the voter's
        ``daily_votes`` in 24 h."""
        if outcome not in OUTCOMES:
            raise VoteRefused(f"A vote is one of {', '.join(OUTCOMES)}, not {str(outcome)[:40]!r}.")
        if unknown := [r for r in reasons if r not in REASONS]:
            raise VoteRefused(f"A reason is one of {', '.join(REASONS)}, not {str(unknown[0])[:40]!r}.")
        with self.queue._transaction(voter) as db:
            row = db.execute("SELECT voter, closed, expires_at - DB_NOW AS left_s FROM arena_battles WHERE battle = ?",
                             (battle,)).fetchone()
            if row is None:
                gone = db.execute("SELECT 1 AS one FROM arena_withdrawals WHERE battle_hash = ?",
                                  (battle_hash(battle),)).fetchone()
                raise VoteRefused("This battle's votes were withdrawn for good: ask for a new battle." if gone else
                                  "This battle is not one the arena issued: ask for a new battle.")
            if row["voter"] != voter:
                raise VoteRefused("This battle was issued to another voter: vote only on the battles you are shown.")
            if row["closed"] == "voted":
                raise VoteRefused("You have already voted on this battle: each battle takes one vote.")
            if row["closed"] == "skipped":
                raise VoteRefused("You skipped this battle: ask for a new one.")
            if row["left_s"] <= 0:
                raise VoteRefused("This battle expired before the vote arrived: ask for a new battle.")
            used = db.execute("SELECT count(*) AS n FROM arena_votes WHERE voter = ? AND voted_at > DB_NOW - ?",
                              (voter, DAY)).fetchone()["n"]
            if used >= daily_votes:
                raise VoteRefused(f"You have cast {used} votes in the last 24 hours, the daily cap of this arena: "
                                  "come back tomorrow.")
            db.execute("INSERT INTO arena_votes (battle, voter, outcome, reasons, voted_at) VALUES (?, ?, ?, ?, DB_NOW)",
                       (battle, voter, outcome, json.dumps(list(dict.fromkeys(reasons)))))
            db.execute("UPDATE arena_battles SET closed = 'voted' WHERE battle = ?", (battle,))
        return self.battle(battle)

    def withdraw(self, voter: str) -> int:
        """Delete every vote and battle of ``voter`` for good, keeping only each battle id's sha256 (so that no
        restore brings a vote back); returns the votes withdrawn. Their voter record (cultures) stays."""
        with self.queue._transaction(voter) as db:
            battles = [row["battle"] for row in db.execute("SELECT battle FROM arena_battles WHERE voter = ?",
                                                           (voter,)).fetchall()]
            withdrawn = db.execute("DELETE FROM arena_votes WHERE voter = ?", (voter,)).rowcount
            db.execute("DELETE FROM arena_battles WHERE voter = ?", (voter,))
            for battle in battles:
                db.execute("INSERT INTO arena_withdrawals (battle_hash, at) VALUES (?, DB_NOW) ON CONFLICT DO NOTHING",
                           (battle_hash(battle),))
        return withdrawn

    def withdrawn(self) -> set[str]:
        """The sha256 of every withdrawn battle's id."""
        with self.queue._connect() as db:
            return {row["battle_hash"] for row in db.execute("SELECT battle_hash FROM arena_withdrawals").fetchall()}

    # --- reading and restoring ------------------------------------------------------------------------------------
    def votes(self) -> pd.DataFrame:
        """Every vote with its battle, oldest first: the battle's fields, ``outcome``, ``reasons`` (a tuple) and
        ``voted_at``."""
        with self.queue._connect() as db:
            rows = db.execute(_BATTLE_SELECT.replace("LEFT JOIN", "JOIN") + " ORDER BY v.voted_at, b.battle").fetchall()
        columns = [f.name for f in fields(Battle)]
        return pd.DataFrame([vars(Battle.of(row)) for row in rows], columns=columns)

    def voters(self) -> pd.DataFrame:
        """Every voter record: ``voter``, ``cultures`` (a list), ``updated_at``."""
        with self.queue._connect() as db:
            rows = db.execute("SELECT voter, cultures, updated_at FROM arena_voters ORDER BY voter").fetchall()
        return pd.DataFrame([{**row, "cultures": json.loads(row["cultures"])} for row in rows],
                            columns=["voter", "cultures", "updated_at"])

    def restore(self, votes: list[dict], voters: list[dict], withdrawn: set[str]) -> dict[str, int]:
        """Add what the store lacks of a published copy (``leaderboard.arena.publish``, seal checked by the caller):
        the withdrawals first, then each voted battle whose id is not withdrawn here or there, then each voter
        record the store lacks (its own is newer). Returns counts: added, present, withdrawn (left out), voters."""
        counts = {"added": 0, "present": 0, "withdrawn": 0, "voters": 0}
        with self.queue._transaction("culturelens arena restore") as db:
            for digest in sorted(withdrawn):
                db.execute("INSERT INTO arena_withdrawals (battle_hash, at) VALUES (?, DB_NOW) ON CONFLICT DO NOTHING",
                           (digest,))
            gone = {row["battle_hash"] for row in db.execute("SELECT battle_hash FROM arena_withdrawals").fetchall()}
            for vote in votes:
                if battle_hash(vote["battle"]) in gone:
                    counts["withdrawn"] += 1
                    continue
                names = [*BATTLE_FIELDS, "closed"]
                inserted = db.execute(
                    f"INSERT INTO arena_battles ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
                    " ON CONFLICT DO NOTHING", (*(vote[n] for n in BATTLE_FIELDS), "voted")).rowcount
                if inserted:
                    db.execute("INSERT INTO arena_votes (battle, voter, outcome, reasons, voted_at) VALUES"
                               " (?, ?, ?, ?, ?)", (vote["battle"], vote["voter"], vote["outcome"],
                                                    json.dumps(list(vote["reasons"])), vote["voted_at"]))
                counts["added" if inserted else "present"] += 1
            for voter in voters:
                counts["voters"] += db.execute(
                    "INSERT INTO arena_voters (voter, cultures, updated_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    (voter["voter"], json.dumps(sorted(voter["cultures"]), ensure_ascii=False),
                     voter["updated_at"])).rowcount
        return counts
