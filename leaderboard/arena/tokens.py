"""What the server signs for the arena, with the app's seal keys (``leaderboard.seal.Keys``: the secret the app and
its workers share, ``CULTURELENS_SEAL_SECRET``, or the store's own key).

- **A voter's keyed hash** (``voter_hash``): the HMAC-SHA256 of the sign-in name, so the votes, the database and the
  published ``votes`` config hold no name, and nobody without the secret can tell which hash is whose (a plain hash
  of a user name is reversed by hashing the Hub's user list).
- **A battle token** (``battle_token``): ``<battle>.<key id>.<HMAC over the battle and its voter>``. Only this server
  can make one, it names the one voter the battle was issued to, and the database makes it single-use (one vote per
  battle) and expiring (``Ballots.cast``).

Rotation (several secrets, the first one sealing): hashes and tokens are made with the first key and checked with
any; a voter hashed under an earlier key is found by ``voter_hashes`` and moved to the current one
(``Ballots.rekey``).
"""

from __future__ import annotations

import hmac
import re

from benchmark.errors import CultureLensError
from leaderboard.seal import Keys

BATTLE_ID = re.compile(r"[0-9a-f]{32}")
_TOKEN = re.compile(r"([0-9a-f]{32})\.([0-9a-f]{16})\.([0-9a-f]{64})")


class TokenRefused(CultureLensError):
    """A vote whose token this server did not issue to this voter; the message says so in a sentence."""


def voter_hashes(keys: Keys, name: str) -> list[str]:
    """The keyed hash of the sign-in ``name`` under each of ``keys`` (the sealing key's first)."""
    return [keys.sign({"kind": "arena voter", "name": name}, key) for key in keys.ids]


def voter_hash(keys: Keys, name: str) -> str:
    """The keyed hash a voter signed in as ``name`` is stored under."""
    return voter_hashes(keys, name)[0]


def battle_token(keys: Keys, battle: str, voter: str) -> str:
    """The token that lets ``voter`` (a keyed hash) vote once on ``battle``."""
    mac = keys.sign({"kind": "arena battle", "battle": battle, "voter": voter})
    return f"{battle}.{keys.sealing}.{mac}"


def token_battle(keys: Keys, token: object, voter: str) -> str:
    """The battle ``token`` lets ``voter`` vote on; TokenRefused when it is not a token this server signed for that
    voter (forged, altered, made with a key it does not hold, or issued to someone else)."""
    match = _TOKEN.fullmatch(token) if isinstance(token, str) else None
    if match is None:
        raise TokenRefused("This vote carries no battle token this server issued: ask for a new battle and vote on it.")
    battle, key, mac = match.groups()
    if not keys.holds(key):
        raise TokenRefused("This vote's battle token was signed with a key this server does not hold (from before a "
                           "key change, or forged): ask for a new battle and vote on it.")
    expected = keys.sign({"kind": "arena battle", "battle": battle, "voter": voter}, key)
    if not hmac.compare_digest(expected, mac):
        raise TokenRefused("This vote's battle token was not issued to you by this server (forged, altered, or "
                           "another voter's): vote only on the battles the arena shows you.")
    return battle
