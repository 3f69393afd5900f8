"""The arena's votes as a dataset: a ``votes`` config of the requests repo, restored after a disk loss under the app's
seal, never bringing back a withdrawn vote.

The requests repo (``leaderboard.hub_sync``, which adds these files to what it mirrors and restores them on ``pull``)
holds, once there is a vote, a voter or a withdrawal::

    votes/votes.parquet       config ``votes``: one row per vote (``VOTE_SCHEMA``): battle, voter (keyed hash),
                              kind, culture, prompt_id, prompt, submission_a/b, model_a/b, image_a/b, gold_answer,
                              outcome, reasons, issued_at, expires_at, voted_at (UTC timestamps)
    votes/voters.parquet      voter (keyed hash), cultures, updated_at
    votes/withdrawals.json    {"battles": [sha256 of each withdrawn battle's id]}
    votes/seal.json           {"seal": 1, "files": {name: sha256}, "key", "hmac"}: the app's seal
                              (``leaderboard.seal.sign``, kind ``KIND``) over the three files' sha256

Under the app's seal rules (``leaderboard.seal``, as the requests repo's ``seal.json``): a seal over bytes, never
over what a file claims. A restore (``restore``) checks the seal, then each file's bytes against it, before reading
anything else: a folder whose seal is missing, made with a key this server does not hold, or not matching the files
(a vote edited, added or removed, or the seal forged) is refused whole, with the reason, and nothing of it is taken.
A sealed one is then read as typed tables and checked row by row (ids, outcomes, reasons), and ``Ballots.restore``
adds what the store lacks: the repo's withdrawals first, then every vote whose battle is withdrawn neither here nor
there. A push (``files`` with ``kept``) drops nothing the repo's sealed folder holds: its withdrawals stay listed (the
list only grows) and its votes the store lacks stay published, unless withdrawn; it pushes nothing over a folder it
cannot check (``leaderboard.hub_sync``). A withdrawal is never undone by the repo: the store keeps the sha256 of every
withdrawn battle, and the next push writes the withdrawals into the repo too. Like the requests repo, the votes can
be rolled back whole to a state the app sealed earlier by a repo writer (``SECURITY.md``); a withdrawal the store
remembers still holds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from benchmark.arena import KINDS, OUTCOMES, REASONS
from leaderboard import seal
from leaderboard.arena.ballots import Ballots, battle_hash
from leaderboard.arena.tokens import BATTLE_ID

log = logging.getLogger("culturelens.arena")

FOLDER = "votes"
VOTES, VOTERS, WITHDRAWALS, SEAL = "votes.parquet", "voters.parquet", "withdrawals.json", "seal.json"
SEALED = (VOTES, VOTERS, WITHDRAWALS)
VERSION = seal.VERSION
KIND = "arena votes"  # what the seal's HMAC is of (``leaderboard.seal.sign``: one message shape for every kind)
CONFIG = {"votes": {"train": f"{FOLDER}/{VOTES}"}}  # the requests card's config
TIME = pa.timestamp("us", tz="UTC")
VOTE_SCHEMA = pa.schema([
    ("battle", pa.string()), ("voter", pa.string()), ("kind", pa.string()), ("culture", pa.string()),
    ("prompt_id", pa.string()), ("prompt", pa.string()), ("submission_a", pa.string()), ("submission_b", pa.string()),
    ("model_a", pa.string()), ("model_b", pa.string()), ("image_a", pa.string()), ("image_b", pa.string()),
    ("gold_answer", pa.string()), ("outcome", pa.string()), ("reasons", pa.list_(pa.string())),
    ("issued_at", TIME), ("expires_at", TIME), ("voted_at", TIME)])
VOTER_SCHEMA = pa.schema([("voter", pa.string()), ("cultures", pa.list_(pa.string())), ("updated_at", TIME)])
_HASH = re.compile(r"[0-9a-f]{64}")


def _parquet(frame: pd.DataFrame, schema: pa.Schema) -> bytes:
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def _times(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Seconds since the epoch (the database's) as UTC timestamps."""
    return frame.assign(**{c: pd.to_datetime(frame[c].astype(float), unit="s", utc=True).dt.round("us")
                           for c in columns})


@dataclass
class Published:
    """What a sealed ``votes/`` folder holds, checked row by row: ``votes`` (one dict per vote, its times in seconds
    since the epoch), ``voters`` (voter, cultures, updated_at) and ``withdrawn`` (the sha256 of each withdrawn battle's
    id)."""

    votes: list[dict]
    voters: list[dict]
    withdrawn: set[str]


def files(ballots: Ballots, keys: seal.Keys, kept: Published | None = None) -> dict[str, bytes]:
    """Path in the requests repo -> bytes: the arena's files (``votes/...``), sealed with ``keys``; none when the
    arena holds no vote, voter or withdrawal. ``kept``: what the repo holds sealed (``sealed``) that a push keeps, as
    the requests repo's seal keeps its records and deletions (``leaderboard.hub_sync``): its withdrawals (the list only
    grows), and its votes and voters the store lacks (a restore that failed: they are not dropped), never a vote either
    side withdrew."""
    votes, voters, withdrawn = ballots.votes(), ballots.voters(), ballots.withdrawn()
    votes = votes.assign(reasons=votes["reasons"].map(list))[list(VOTE_SCHEMA.names)]
    if kept is not None:
        withdrawn |= kept.withdrawn
        known = set(votes["battle"])
        extra = pd.DataFrame([v for v in kept.votes if v["battle"] not in known], columns=VOTE_SCHEMA.names)
        votes = pd.concat([votes, extra], ignore_index=True) if len(extra) else votes
        votes = votes[~votes["battle"].map(battle_hash).isin(withdrawn)].sort_values(["voted_at", "battle"])
        people = set(voters["voter"])
        others = pd.DataFrame([v for v in kept.voters if v["voter"] not in people], columns=voters.columns)
        voters = pd.concat([voters, others], ignore_index=True).sort_values("voter") if len(others) else voters
    if votes.empty and voters.empty and not withdrawn:
        return {}
    made = {VOTES: _parquet(_times(votes, ["issued_at", "expires_at", "voted_at"]), VOTE_SCHEMA),
            VOTERS: _parquet(_times(voters, ["updated_at"]), VOTER_SCHEMA),
            WITHDRAWALS: json.dumps({"battles": sorted(withdrawn)}, indent=1).encode()}
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in made.items()}
    made[SEAL] = json.dumps({"seal": VERSION, "files": digests, **seal.sign(keys, KIND, {"files": digests})},
                            indent=1, sort_keys=True).encode()
    return {f"{FOLDER}/{name}": data for name, data in made.items()}


def refusal(read: Callable[[str], bytes | None], keys: seal.Keys) -> str | None:
    """Why the arena files ``read`` gives (name -> bytes, None when missing: a repo snapshot's ``votes/``) are not as
    a server holding one of ``keys`` sealed them, or None: the seal missing or not one, a file's bytes not those
    sealed, or the HMAC not the seal of the digests (``leaderboard.seal.refusal``)."""
    data = read(SEAL)
    if data is None:
        return f"{FOLDER}/{SEAL} is missing: votes are restored only as this server sealed them"
    try:
        record = json.loads(data)
    except ValueError:
        return f"{FOLDER}/{SEAL} is not readable JSON"
    if not isinstance(record, dict) or record.get("seal") != VERSION or not isinstance(record.get("files"), dict) \
            or sorted(record["files"]) != sorted(SEALED):
        return f"{FOLDER}/{SEAL} is not a seal of the arena's files ({', '.join(SEALED)})"
    if why := seal.refusal(record, keys, KIND, {"files": record["files"]}, "files", "votes"):
        return f"{FOLDER}/{SEAL}: {why}"
    for name in SEALED:
        data = read(name)
        if data is None or hashlib.sha256(data).hexdigest() != record["files"][name]:
            return f"{FOLDER}/{name} is not the file sealed (changed or removed after the app wrote it)"
    return None


def _rows(read: Callable[[str], bytes | None]) -> Published:
    """The sealed files' rows, typed and checked; ValueError saying which row is not a vote."""
    votes = pq.read_table(pa.BufferReader(read(VOTES)))
    voters = pq.read_table(pa.BufferReader(read(VOTERS)))
    if votes.schema.remove_metadata() != VOTE_SCHEMA or voters.schema.remove_metadata() != VOTER_SCHEMA:
        raise ValueError("its tables do not have the arena's columns")
    withdrawn = json.loads(read(WITHDRAWALS)).get("battles")
    if not isinstance(withdrawn, list) or not all(isinstance(h, str) and _HASH.fullmatch(h) for h in withdrawn):
        raise ValueError(f"{WITHDRAWALS} is not a list of sha256")
    rows = []
    for n, row in enumerate(votes.to_pylist()):
        if not (isinstance(row["battle"], str) and BATTLE_ID.fullmatch(row["battle"]) and _HASH.fullmatch(
                row["voter"] or "") and row["kind"] in KINDS and row["outcome"] in OUTCOMES
                and set(row["reasons"] or ()) <= set(REASONS)
                and all(isinstance(row[f], str) for f in ("culture", "prompt_id", "prompt", "model_a", "model_b",
                                                           "image_a", "image_b"))
                and all(row[f] is not None for f in ("issued_at", "expires_at", "voted_at"))):
            raise ValueError(f"row {n} of {VOTES} is not a vote")
        rows.append({**row, **{f: row[f].timestamp() for f in ("issued_at", "expires_at", "voted_at")}})
    people = []
    for n, row in enumerate(voters.to_pylist()):
        if not (_HASH.fullmatch(row["voter"] or "") and all(isinstance(c, str) for c in row["cultures"] or ())
                and row["updated_at"] is not None):
            raise ValueError(f"row {n} of {VOTERS} is not a voter")
        people.append({**row, "cultures": row["cultures"] or [], "updated_at": row["updated_at"].timestamp()})
    return Published(rows, people, set(withdrawn))


def sealed(read: Callable[[str], bytes | None], keys: seal.Keys) -> tuple[Published | None, str | None]:
    """What the arena files ``read`` gives hold, checked (``refusal``, then every row): (it, None), or (None, why
    they are refused whole)."""
    why = refusal(read, keys)
    if why is None:
        try:
            return _rows(read), None
        except (ValueError, OSError, pa.ArrowException) as error:
            why = f"its files are sealed but not the arena's ({error})"
    return None, why


def folder_files(folder: Path) -> Callable[[str], bytes | None]:
    """The reader of the arena files in ``folder`` (a repo snapshot's ``votes/``): name -> bytes, None when missing."""
    return lambda name: (folder / name).read_bytes() if (folder / name).is_file() else None


def restore(ballots: Ballots, keys: seal.Keys, snapshot: Path) -> dict[str, int] | None:
    """Add to the store what the repo snapshot ``snapshot`` holds of the arena and the store lacks, under the store's
    seal ``keys``; None when it holds none. Counts ``votes_added``, ``votes_present``, ``votes_withdrawn`` (left out:
    withdrawn), ``voters_added``, and ``votes_refused`` (1 when the folder was refused whole, the reason logged)."""
    folder = Path(snapshot) / FOLDER
    if not folder.is_dir():
        return None
    found, why = sealed(folder_files(folder), keys)
    if found is None:
        log.warning("hub restore: the arena's votes were not restored: %s", why)
        return {"votes_added": 0, "votes_present": 0, "votes_withdrawn": 0, "voters_added": 0, "votes_refused": 1}
    counts = ballots.restore(found.votes, found.voters, found.withdrawn)
    return {"votes_added": counts["added"], "votes_present": counts["present"],
            "votes_withdrawn": counts["withdrawn"], "voters_added": counts["voters"], "votes_refused": 0}
