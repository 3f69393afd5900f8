"""A real PostgreSQL server in a temporary folder, for the queue's tests and ``benchmarks/crash_soak.py``.

``PostgresServer().start()`` runs ``initdb`` and ``pg_ctl start`` with the server's binaries (Debian's
``postgresql`` package: ``/usr/lib/postgresql/<version>/bin``, or on ``PATH``), listening only on a Unix socket
in its folder (no port to collide with), with trust authentication for its one superuser; ``database()`` makes a
fresh database and returns its URL; ``stop()`` stops the server and removes the folder. ``initdb`` refuses to run
as root: run as root (CI), the server runs as the ``postgres`` system user the package creates, and owns its
folder. ``missing()`` says why no server can be started here, or None.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

SUPERUSER = "culturelens"


def binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, newest version first; None when not installed."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name)
                        if p.parent.name.isdigit() else 0, reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    return next((c for c in candidates if (c / "initdb").exists() and (c / "pg_ctl").exists()), None)


def _server_user() -> str | None:
    """Who runs the server: None (this user), or ``postgres`` when this process is root."""
    return "postgres" if os.geteuid() == 0 else None


def missing() -> str | None:
    """Why no server can be started here (a reason to skip with), or None."""
    if binaries() is None:
        return "PostgreSQL's initdb/pg_ctl not found (Debian: apt-get install postgresql)"
    if _server_user():
        try:
            pwd.getpwnam(_server_user())
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as (initdb refuses root)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    return None


class PostgresServer:
    def __init__(self):
        self.folder: Path | None = None
        self._names = itertools.count()

    @property
    def socket_dir(self) -> Path:
        return self.folder / "socket"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@/{database}?host={self.socket_dir}"

    def _run(self, *command: str) -> None:
        user = _server_user()
        result = subprocess.run([str(binaries() / command[0]), *command[1:]], capture_output=True, text=True,
                                user=user, group=user, extra_groups=[] if user else None, timeout=120, cwd=self.folder)
        if result.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{command[0]} failed ({result.returncode}): {result.stdout}{result.stderr}{tail}")

    def start(self) -> PostgresServer:
        if reason := missing():
            raise RuntimeError(reason)
        self.folder = Path(tempfile.mkdtemp(prefix="culturelens-pg-"))
        self.socket_dir.mkdir()
        if user := _server_user():
            account = pwd.getpwnam(user)
            for path in (self.folder, self.socket_dir):
                os.chown(path, account.pw_uid, account.pw_gid)
        data = self.folder / "data"
        self._run("initdb", "-D", str(data), "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8")
        options = (f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run("pg_ctl", "-D", str(data), "-l", str(self.folder / "server.log"), "-o", options, "-w", "start")
        return self

    def database(self) -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = f"test_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop(self, url: str) -> None:
        """Remove the database ``url`` names (connections still open to it are closed)."""
        import psycopg

        name = url.rsplit("/", 1)[1].split("?")[0]
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self.folder is None:
            return
        try:
            self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
