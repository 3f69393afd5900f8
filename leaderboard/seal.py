"""Seals: what tells results a worker of this queue wrote from results anyone else put in a repo.

A worker seals each results folder it writes (``seal.json``, ``layout.SEAL``): an HMAC-SHA256, keyed by a secret the
operator gives the app and every worker of its queue (``operator_settings.SEAL_SECRET``), over a canonical form of
run.json (which names the submission, the request and the lease the results answer) and the sha256 of every result
table's bytes ("empty" for a table of no rows, which is one known file, ``results.empty_table``: a repo never holds
one, and it is written back, ``results.complete``; a file of other bytes is never "empty", whatever its footer
says). The seal names its key by an id (a digest of the secret, which tells nothing of it), so that keys can rotate:
the first secret seals, every one verifies. The app seals the same way (``sign``, one message shape for every kind)
each leaderboard release it publishes (``release_seal``: the release's number, its file's sha256 and its
submissions), its requests repo (``requests_seal``: the sha256 of each record file and every deletion) and each
line of its queue's ledger (``ledger_line``).

The store checks a seal wherever results or records come from outside: a results folder taken from a repo
(``Results.add``: the pickup, a restore), a release before it is installed (``leaderboard.pickup``), the requests repo
before a restore (``leaderboard.hub_sync``), and a queue rebuilt from the store's folders trusts only sealed ledger
lines and marks FINISHED only a submission whose sealed results answer it. So whoever can write a repo, but holds no
secret, can neither forge a folder, a record or a deletion, nor change a value of a sealed one, nor of a release.

Without a configured secret a store seals with a key of its own, ``STORE/seal.key`` (made on first use, readable by
its owner only, and never made again in place of a lost one while the store holds sealed results: ``keys_for``):
enough for a server whose worker shares its disk. A worker on another machine, and an app started on an empty disk (a
Space without persistent storage), need the secret: results sealed with a key a server does not hold are refused,
with the key's id in the reason. ``serve`` and ``worker`` check the key before anything else (``check_at_start``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmark import layout, results
from benchmark.digests import file_digest
from benchmark.errors import CultureLensError

KEY_FILE = "seal.key"  # STORE/seal.key: the store's own secret, when none is configured
MIN_SECRET_CHARS = 16
VERSION = 1
EMPTY = "empty"  # a result table of no rows, in a seal's digests
NEW_KEY = "python -c \"import secrets; print(secrets.token_urlsafe(32))\""  # a command that makes a secret


class SealError(CultureLensError):
    """A seal secret that cannot be used (too short); the message says what to set."""


def key_id(secret: bytes) -> str:
    """The id a seal names its key by: 16 hex digits of a digest of the secret (the secret cannot be read back)."""
    return hashlib.sha256(b"culturelens seal key id\0" + secret).hexdigest()[:16]


@dataclass(frozen=True)
class Keys:
    """The secrets a server seals and verifies with: the first seals, every one verifies (key rotation)."""

    secrets: tuple[bytes, ...]
    origin: str  # where they came from, for messages: the variable, or STORE/seal.key

    @property
    def sealing(self) -> str:
        """The id of the key this server seals with."""
        return key_id(self.secrets[0])

    @property
    def ids(self) -> list[str]:
        return [key_id(secret) for secret in self.secrets]

    def sign(self, message: dict, key: str | None = None) -> str:
        """The HMAC-SHA256 of ``message`` (canonical JSON) under the key ``key`` (an id; None: the sealing key)."""
        secret = {key_id(s): s for s in self.secrets}[key or self.sealing]
        return hmac.new(secret, canonical(message), hashlib.sha256).hexdigest()

    def holds(self, key: object) -> bool:
        return isinstance(key, str) and key in self.ids

    @classmethod
    def parse(cls, text: str, origin: str) -> Keys:
        """Secrets separated by spaces; SealError for none, or one too short to seal with."""
        found = tuple(part.encode() for part in text.split())
        if not found:
            raise SealError(f"{origin}: no seal secret in it")
        if short := [s for s in found if len(s) < MIN_SECRET_CHARS]:
            raise SealError(f"{origin}: a seal secret of {len(short[0])} characters is too short (at least "
                            f"{MIN_SECRET_CHARS}; make one with `{NEW_KEY}`)")
        return cls(found, origin)


def keys_for(store_root: Path) -> Keys:
    """The keys of the store at ``store_root``: the configured secret(s) (``CULTURELENS_SEAL_SECRET``), else the
    store's own key file, made on first use (owner-readable only; made whole by one link, so processes starting
    together read the same key), but never in place of a lost one: SealError, with what to do, for a key file that
    is missing while the store holds sealed results (``sealed_keys``), empty, short, or that cannot be read (a folder
    in its place)."""
    from leaderboard.operator_settings import SEAL_SECRET

    configured = SEAL_SECRET.resolve()
    if configured:
        return Keys.parse(str(configured), SEAL_SECRET.env)
    path, where = Path(store_root) / KEY_FILE, f"STORE/{KEY_FILE}"
    if not os.path.lexists(path):
        if found := sealed_keys(store_root):
            raise SealError(f"{where} is missing, but this store holds sealed results ({_census(found)}): put back "
                            f"the key that sealed them, or set {SEAL_SECRET.env} to its secret; a new key would not "
                            f"take them back from a repo nor keep them finished in a rebuilt queue (to seal with a "
                            f"new key anyway: `{NEW_KEY} > {where}`)")
        _make_key(path)
    try:
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise SealError(f"{where} is a folder, not a key file: remove it (a new key is made) or put the store's key "
                        f"back in its place, or set {SEAL_SECRET.env}") from None
    except (OSError, UnicodeDecodeError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else type(error).__name__
        raise SealError(f"{where} cannot be read ({why}): give the user running this server read access to it, or "
                        f"set {SEAL_SECRET.env}") from None
    return Keys.parse(text, where)


def _make_key(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".seal-key-", dir=path.parent)
    try:
        os.write(fd, secrets.token_urlsafe(32).encode())
        os.close(fd)
        try:
            os.link(name, path)
        except FileExistsError:  # another process made it first: its key is the store's
            pass
    finally:
        os.unlink(name)


def sealed_keys(store_root: Path) -> dict[str, int]:
    """The keys (ids) the store's results folders (``results/<id>/seal.json``) and its installed release
    (``leaderboard/latest.json``) are sealed with, and how many of those each sealed: read from the seals' "key"
    field (a start's check: nothing is verified here)."""
    found: dict[str, int] = {}
    seals = [*(Path(store_root) / layout.RESULTS).glob(f"[!.]*/{layout.SEAL}"),
             Path(store_root) / "leaderboard" / "latest.json"]  # ``leaderboard.snapshot.LATEST``, written by install
    for path in seals:
        record = _json_object(path)
        key = (record.get("seal") if path.name == "latest.json" else record) if record else None
        if isinstance(key, dict) and isinstance(key.get("key"), str):
            found[key["key"][:20]] = found.get(key["key"][:20], 0) + 1
    return found


def _census(found: dict[str, int]) -> str:
    return ", ".join(f"{n} with key {key!r}" for key, n in sorted(found.items()))


def check_at_start(store_root: Path) -> list[str]:
    """What ``culturelens serve`` and ``worker`` check before anything is scored: the store's keys (``keys_for``:
    SealError, a sentence the command line ends with, for a key missing, empty, short or unreadable). Returns what the
    operator should read: that a key was made, and what becomes of the store's sealed results when it holds none of
    the keys they were sealed with (a new secret)."""
    from leaderboard.operator_settings import SEAL_SECRET

    made = not SEAL_SECRET.resolve() and not os.path.lexists(Path(store_root) / KEY_FILE)
    keys = keys_for(store_root)
    lines = [f"made the store's seal key, STORE/{KEY_FILE}: the results its workers write are sealed with it"
             ] if made else []
    if foreign := {key: n for key, n in sealed_keys(store_root).items() if not keys.holds(key)}:
        lines.append(f"warning: this store holds results sealed with keys this server does not hold "
                     f"({_census(foreign)}; its keys: {', '.join(keys.ids)}, from {keys.origin}): they are still "
                     "served from this disk, but refused wherever a seal is checked: not taken from a repo, scored "
                     "again if the queue is rebuilt or restored, a release sealed with them not installed. To keep "
                     f"them, give the old secret too, after the new one in {SEAL_SECRET.env} (space-separated)")
    return lines


def canonical(record: object) -> bytes:
    """The bytes a seal signs: JSON with sorted keys, no spaces, non-ASCII as it is."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def table_digests(folder: Path) -> dict[str, str]:
    """Each result table of ``folder`` by the sha256 of its bytes, or ``EMPTY`` for none at all or the one file of
    no rows (``results.is_empty_table``, told by its bytes: never by the row count its footer claims)."""
    digests = {}
    for name in layout.RESULT_PARQUET:
        path = Path(folder) / name
        digests[name] = EMPTY if not path.is_file() or results.is_empty_table(path) else file_digest(path)
    return digests


def _json_object(path: Path) -> dict | None:
    """The JSON object in the file at ``path`` as it is (what a seal is over), or None when it holds none."""
    try:
        record = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def seal_folder(folder: Path, keys: Keys) -> None:
    """Write ``folder``'s seal (``layout.SEAL``) over its run.json and result tables, with the sealing key; the folder
    is a temporary one being written (``Results.write``), renamed into place afterwards."""
    folder = Path(folder)
    run = _json_object(folder / layout.RUN)
    files = table_digests(folder)
    record = {"seal": VERSION, "files": files, **sign(keys, "results", {"run": run, "files": files})}
    (folder / layout.SEAL).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")


def folder_refusal(folder: Path, keys: Keys) -> str | None:
    """Why the results folder ``folder`` is not as a worker holding one of ``keys`` sealed it, or None: a seal that
    is missing or not one, of a key this server does not hold, over other tables than those there, or whose HMAC does
    not match (run.json or the seal changed, or forged)."""
    folder = Path(folder)
    try:
        record = json.loads((folder / layout.SEAL).read_bytes())
    except FileNotFoundError:
        return (f"it carries no seal ({layout.SEAL}): results are taken only as a worker of this queue sealed them "
                "(results written before seals: re-run the submission)")
    except (OSError, ValueError):
        return f"its {layout.SEAL} is not readable JSON"
    if not isinstance(record, dict) or record.get("seal") != VERSION or not isinstance(record.get("files"), dict) \
            or not isinstance(record.get("hmac"), str):
        return f"its {layout.SEAL} is not a seal (seal: {VERSION}, key, files, hmac)"
    if not keys.holds(record.get("key")):
        return (f"it is sealed with key {str(record.get('key'))[:20]!r}, which this server does not hold (its keys: "
                f"{', '.join(keys.ids)}, from {keys.origin}): give it the secret of the queue's workers")
    files = table_digests(folder)
    if changed := sorted(name for name in files if record["files"].get(name) != files[name]):
        return f"its {', '.join(changed)} {'is not the file' if len(changed) == 1 else 'are not the files'} sealed"
    run = _json_object(folder / layout.RUN)
    if run is None:
        return f"its {layout.RUN} is not a JSON object"
    expected = keys.sign(_message("results", record["key"], {"run": run, "files": files}), record["key"])
    if not hmac.compare_digest(expected, record["hmac"]):
        return f"its seal does not match its {layout.RUN} (changed after it was sealed, or forged)"
    return None


def _message(kind: str, key: str, content: dict) -> dict:
    """What a seal of ``kind`` signs: the kind, the seal's version and key, and ``content``."""
    return {"kind": kind, "version": VERSION, "key": key, **content}


def sign(keys: Keys, kind: str, content: dict) -> dict:
    """The seal of ``content`` (a record of ``kind``) with the sealing key: {"key": its id, "hmac": ...}."""
    return {"key": keys.sealing, "hmac": keys.sign(_message(kind, keys.sealing, content))}


def refusal(sealed: object, keys: Keys, kind: str, content: dict, what: str, taken: str) -> str | None:
    """Why ``sealed`` (a dict holding "key" and "hmac") is not the seal of ``content`` by a key this server holds, or
    None; in the messages, ``what`` names what the seal is over, ``taken`` (plural) what is taken only sealed."""
    if not isinstance(sealed, dict) or not isinstance(sealed.get("hmac"), str):
        return f"it carries no seal: {taken} are taken only as this queue's app and workers sealed them"
    if not keys.holds(sealed.get("key")):
        return (f"it is sealed with key {str(sealed.get('key'))[:20]!r}, which this server does not hold (its keys: "
                f"{', '.join(keys.ids)}, from {keys.origin})")
    if not hmac.compare_digest(keys.sign(_message(kind, sealed["key"], content), sealed["key"]), sealed["hmac"]):
        return f"its seal does not match its {what} (changed after it was sealed, or forged)"
    return None


def release_seal(keys: Keys, number: int, file_sha256: str, submissions: dict[str, str]) -> dict:
    """The seal latest.json carries for release ``number``: its key and the HMAC over the number, the sha256 of the
    release's file and its submissions (id -> sha256 of its run.json)."""
    return sign(keys, "release", {"release": number, "file": file_sha256, "submissions": submissions})


def release_refusal(seal: object, keys: Keys, number: int, file_sha256: str,
                    submissions: dict[str, str]) -> str | None:
    """Why a release is not as the app holding one of ``keys`` published it, or None."""
    return refusal(seal, keys, "release", {"release": number, "file": file_sha256, "submissions": submissions},
                   "file and submissions", "releases")


def requests_seal(keys: Keys, records: dict[str, str], deletions: dict[str, str]) -> dict:
    """The requests repo's seal (its ``seal.json``, ``leaderboard.hub_sync``): the sha256 of each record file the
    app wrote (id -> digest) and every deletion (id -> when), under the sealing key."""
    content = {"records": records, "deletions": deletions}
    return {"seal": VERSION, **content, **sign(keys, "requests", content)}


def requests_refusal(index: object, keys: Keys) -> str | None:
    """Why ``index`` (a requests repo's seal.json, parsed) is not one the app holding one of ``keys`` wrote, or
    None."""
    if not isinstance(index, dict) or index.get("seal") != VERSION or not isinstance(index.get("records"), dict) \
            or not isinstance(index.get("deletions"), dict):
        return f"it is not a requests seal (seal: {VERSION}, records, deletions, key, hmac)"
    return refusal(index, keys, "requests", {"records": index["records"], "deletions": index["deletions"]},
                   "records and deletions", "requests repos")


LEDGER_SEAL = ("key", "hmac")  # the fields ``ledger_line`` adds to a queue ledger's line


def ledger_line(keys: Keys, event: dict) -> dict:
    """A queue ledger's line (``leaderboard.queue_rebuild``): ``event`` with its seal, under the sealing key."""
    return {**event, **sign(keys, "ledger", event)}


def ledger_refusal(line: dict, keys: Keys) -> str | None:
    """Why a ledger line is not one this queue's app or workers wrote (``ledger_line``), or None."""
    return refusal(line, keys, "ledger", {k: v for k, v in line.items() if k not in LEDGER_SEAL}, "event", "ledger lines")
