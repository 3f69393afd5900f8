"""The arena's votes as a dataset: a ``votes`` config of the requests repo, restored after a disk loss under the app's
seal, never bringing back a withdrawn vote.

The requests repo (``leaderboard.hub_sync``, which adds these files to what it mirrors and restores them on ``pull``)
holds, once there is a vote, a voter or a withdrawal::

    votes/votes.parquet       config ``votes``: one row per vote (``VOTE_SCHEMA``): battle, voter (keyed hash),
                              kind, culture, prompt_id, prompt, submission_a/b, model_a/b, image_a/b, gold_answer,
                              outcome, reasons, issued_at, expires_at, voted_at (UTC timestamps)
    votes/voters.parquet      voter (keyed hash), cultures, updated_at
    votes/withdrawals.json    {"battles": [sha256 of each withdrawn battle's id]}
    votes/seal.json           {"seal": 1, "key", "files": {name: sha256}, "hmac"}: an HMAC-SHA256 with the app's seal
                              key (``leaderboard.seal.Keys``) over the three files' sha256

A restore (``restore``) checks the seal against the files' bytes before reading anything else: a folder whose seal
is missing, made with a key this server does not hold, or not matching the files (a vote edited, added or removed,
or the seal forged) is refused whole, with the reason, and nothing of it is taken. A sealed one is then read as
typed tables and checked row by row (ids, outcomes, reasons), and ``Ballots.restore`` adds what the store lacks:
the repo's withdrawals first, then every vote whose battle is withdrawn neither here nor there. A withdrawal is
never undone by the repo: the store keeps the sha256 of every withdrawn battle, and the next push writes the
withdrawals into the repo too.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from benchmark.arena import KINDS, OUTCOMES, REASONS
from leaderboard.arena.ballots import Ballots
from leaderboard.arena.tokens import BATTLE_ID
from leaderboard.seal import Keys, keys_for

log = logging.getLogger("culturelens.arena")

FOLDER = "votes"
VOTES, VOTERS, WITHDRAWALS, SEAL = "votes.parquet", "voters.parquet", "withdrawals.json", "seal.json"
SEALED = (VOTES, VOTERS, WITHDRAWALS)
VERSION = 1
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


def _message(key: str, files: dict[str, str]) -> dict:
    return {"kind": "arena votes", "version": VERSION, "key": key, "files": files}


def files(ballots: Ballots, store_root: Path) -> dict[str, bytes]:
    """Path in the requests repo -> bytes: the arena's files (``votes/...``), sealed with the store's keys
    (``seal.keys_for``); none when the arena holds no vote, voter or withdrawal."""
    votes, voters, withdrawn = ballots.votes(), ballots.voters(), ballots.withdrawn()
    if votes.empty and voters.empty and not withdrawn:
        return {}
    keys = keys_for(store_root)
    votes = votes.assign(reasons=votes["reasons"].map(list))
    made = {VOTES: _parquet(_times(votes, ["issued_at", "expires_at", "voted_at"])[VOTE_SCHEMA.names], VOTE_SCHEMA),
            VOTERS: _parquet(_times(voters, ["updated_at"]), VOTER_SCHEMA),
            WITHDRAWALS: json.dumps({"battles": sorted(withdrawn)}, indent=1).encode()}
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in made.items()}
    seal = {"seal": VERSION, "key": keys.sealing, "files": digests, "hmac": keys.sign(_message(keys.sealing, digests))}
    made[SEAL] = json.dumps(seal, indent=1, sort_keys=True).encode()
    return {f"{FOLDER}/{name}": data for name, data in made.items()}


def refusal(folder: Path, keys: Keys) -> str | None:
    """Why the arena files in ``folder`` (a repo snapshot's ``votes/``) are not as this server sealed them, or None."""
    try:
        seal = json.loads((folder / SEAL).read_bytes())
    except FileNotFoundError:
        return f"{FOLDER}/{SEAL} is missing: votes are restored only as this server sealed them"
    except (OSError, ValueError):
        return f"{FOLDER}/{SEAL} is not readable JSON"
    if not isinstance(seal, dict) or seal.get("seal") != VERSION or not isinstance(seal.get("files"), dict) \
            or sorted(seal["files"]) != sorted(SEALED) or not isinstance(seal.get("hmac"), str):
        return f"{FOLDER}/{SEAL} is not a seal of the arena's files ({', '.join(SEALED)})"
    if not keys.holds(seal.get("key")):
        return (f"the votes are sealed with key {str(seal.get('key'))[:20]!r}, which this server does not hold (its "
                f"keys: {', '.join(keys.ids)}, from {keys.origin}): give it the app's seal secret")
    for name in SEALED:
        path = folder / name
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != seal["files"][name]:
            return f"{FOLDER}/{name} is not the file sealed (changed or removed after the app wrote it)"
    if not hmac.compare_digest(keys.sign(_message(seal["key"], seal["files"]), seal["key"]), seal["hmac"]):
        return f"{FOLDER}/{SEAL} does not match the files (forged)"
    return None


def _read(folder: Path) -> tuple[list[dict], list[dict], set[str]]:
    """The sealed files' rows, typed and checked; ValueError saying which row is not a vote."""
    votes = pq.read_table(folder / VOTES)
    voters = pq.read_table(folder / VOTERS)
    if votes.schema.remove_metadata() != VOTE_SCHEMA or voters.schema.remove_metadata() != VOTER_SCHEMA:
        raise ValueError("its tables do not have the arena's columns")
    withdrawn = json.loads((folder / WITHDRAWALS).read_bytes()).get("battles")
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
    return rows, people, set(withdrawn)


def restore(ballots: Ballots, store_root: Path, snapshot: Path) -> dict[str, int] | None:
    """Add to the store at ``store_root`` what the repo snapshot ``snapshot`` holds of the arena and the store lacks,
    under the store's seal keys; None when it holds none. Counts ``votes_added``, ``votes_present``, ``votes_withdrawn`` (left out: withdrawn), ``voters_added``,
    and ``votes_refused`` (1 when the folder was refused, the reason logged)."""
    folder = Path(snapshot) / FOLDER
    if not folder.is_dir():
        return None
    why = refusal(folder, keys_for(store_root))
    if why is None:
        try:
            votes, voters, withdrawn = _read(folder)
        except (ValueError, OSError, pa.ArrowException) as error:
            why = f"its files are sealed but not the arena's ({error})"
    if why is not None:
        log.warning("hub restore: the arena's votes were not restored: %s", why)
        return {"votes_added": 0, "votes_present": 0, "votes_withdrawn": 0, "voters_added": 0, "votes_refused": 1}
    counts = ballots.restore(votes, voters, withdrawn)
    return {"votes_added": counts["added"], "votes_present": counts["present"],
            "votes_withdrawn": counts["withdrawn"], "voters_added": counts["voters"], "votes_refused": 0}
