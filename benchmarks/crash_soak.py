"""Crash soak: SIGKILL scoring workers at random points, K times, and check that nothing is lost or doubled.

    python benchmarks/crash_soak.py [--kills 20] [--workers 2] [--seeds 24] [--size 128] [--seed 0]
                                    [--backbones FILE] [--jobs N] [--queue URL | --postgres]

It builds a store (a 6-prompt CUBE-format dataset, submissions of distinct random images), starts
``--workers`` real ``culturelens worker`` processes with a short lease, and, K times, picks a job that is
being scored, waits a random time, and SIGKILLs its worker, starting a fresh one in its place. Submissions
keep arriving while workers score (one whenever fewer than ``workers + 1`` jobs are waiting), so there is
always something to kill; a job on its last attempt is never killed (that path, FAILED after repeated
crashes or FINISHED when the last attempt had written its results, is tests/test_queue.py's). Then it checks,
and prints as figures:

- every submission is FINISHED, or FAILED with a reason;
- each finished submission has one complete results folder: per-image rows unique per (prompt, seed, metric)
  and covering every image, aggregates unique per (metric, slice, value), and the leaderboard's DuckDB view
  shows exactly those rows (no leftovers of a killed write);
- no job was scored by two workers at once (attempt numbers in the worker logs are distinct), and none was
  scored to the end twice (each worker logs ``scored ID (attempt N)`` when its scoring completes; a worker
  killed after that line, while writing results, lost its work and is not counted);
- a job's last attempt found in the cache every embedding of its images that was there when its previous
  worker was killed (cache hits on resume), and jobs killed mid-scoring were taken over by another worker
  once the lease expired.

With ``--jobs N`` the N submissions are queued at the start and none arrive later: the workers race to claim
them while up to K of them are killed (fewer when the queue drains first).

The queue is the store's SQLite file, or with ``--queue postgresql://...`` a PostgreSQL database (the workers
get it in ``CULTURELENS_QUEUE``), or with ``--postgres`` a server this script starts in a temporary folder
(``tests/postgres.py``, as the tests do). The workers share the store's disk either way (submissions, results
and the embedding cache); only the queue moves to the server.

Without ``--backbones`` it uses the small random CLIP of ``harness_speed.py``; ``tests/test_crash_recovery.py``
runs the same code with K = 3 and the test suite's tiny CLIP.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.helpers (tiny dataset, images) and benchmarks.harness_speed

from benchmark.datasets import cube_1k  # noqa: E402
from benchmark.datasets.prompts import local_folder  # noqa: E402
from leaderboard import hub_sync, pickup  # noqa: E402
from leaderboard.catalog import Catalog  # noqa: E402
from leaderboard.repo import LocalRepo  # noqa: E402
from leaderboard.store import Store  # noqa: E402
from tests.helpers import TINY_UPSTREAM, manifest, write_image  # noqa: E402

RESULT_FILES = {"per_image.parquet", "aggregates.parquet", "curves.parquet", "run.json"}
_SCORED = re.compile(r"scored (\d+) images \((\d+) embeddings computed, (\d+) from the cache\)")
_ATTEMPT = re.compile(r"scoring (\S+) \(.*\), attempt (\d+)")
_COMPLETED = re.compile(r"scored (\S+) \(attempt (\d+)\)")


@dataclass
class Kill:
    job: str
    pid: int
    stage: str  # the job's progress message when its worker was killed
    cached_images: int  # cache entries of the job's images right after the kill


@dataclass
class Soak:
    """A store, its worker processes, and what was done to them."""

    store: Store
    backbones: Path
    logs: Path
    queue: str | None = None  # a PostgreSQL URL the store's queue is on (None: the store's queue.sqlite)
    remote: Path | None = None  # remote workers: a folder holding the requests and results repos and the machines
    lease_seconds: float = 3.0
    batch_size: int = 2
    seeds: int = 24
    size: int = 128
    workers: dict[int, subprocess.Popen] = field(default_factory=dict)
    worker_logs: dict[int, Path] = field(default_factory=dict)
    machines: dict[int, Path] = field(default_factory=dict)  # remote: the store of each worker's machine
    kills: list[Kill] = field(default_factory=list)
    submitted: int = 0
    started: int = 0

    def __post_init__(self) -> None:
        if self.remote is not None:  # the two repos the app and the remote workers share, empty at first
            for repo in (self.requests_repo, self.results_repo):
                repo.mkdir(parents=True, exist_ok=True)

    @property
    def requests_repo(self) -> Path:
        return self.remote / "requests-repo"

    @property
    def results_repo(self) -> Path:
        return self.remote / "results-repo"

    # --- submissions ----------------------------------------------------------------------------------------
    def submit(self) -> str:
        """Queue one more submission of new random images (its own model id and owner: no quota, no duplicate)."""
        n = self.submitted
        prompt_ids = list(self.store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
        folder = Path(tempfile.mkdtemp(prefix=f"soak-{n}-", dir=self.logs))
        seeds = tuple(range(self.seeds))
        data = manifest(seeds=seeds, model={"name": f"Soak model {n}", "id": f"soak/model-{n}", "revision": "1",
                                            "type": "open"})
        data["generation"].update(width=self.size, height=self.size)
        (folder / "manifest.json").write_text(json.dumps(data), encoding="utf-8")
        for i, prompt_id in enumerate(prompt_ids):
            for seed in seeds:
                write_image(folder / "images" / prompt_id / f"{seed}.png", seed=10**6 * (n + 1) + 1000 * i + seed,
                            size=self.size)
        outcome = self.store.submit(folder, f"soak-user-{n}")
        if outcome.job is None:
            raise RuntimeError(f"the soak's own submission was rejected: {outcome.report.errors}")
        if self.remote is not None:
            self.push_requests()
        self.submitted += 1
        return outcome.job.id

    def push_requests(self) -> None:
        """What the app's mirror pushes to the requests repo: each new submission's files appear at once, as a
        Hub commit's do (exported aside, then renamed into the repo folder)."""
        staged = Path(tempfile.mkdtemp(dir=self.remote))
        hub_sync.export(self.store, "requests", staged)
        repo = self.requests_repo / "submissions"
        repo.mkdir(parents=True, exist_ok=True)
        for folder in (staged / "submissions").iterdir():
            if not (repo / folder.name).exists():
                folder.rename(repo / folder.name)
        shutil.rmtree(staged)

    # --- workers ----------------------------------------------------------------------------------------------
    def start_worker(self, machine: Path | None = None) -> int:
        """A worker on the app's store, or (remote) on ``machine``'s own store: a new machine when None, which
        gets the served dataset as its operator would build it."""
        path = self.logs / f"worker-{self.started}.log"
        log = open(path, "w")
        self.started += 1
        store, hub = self.store.root, []
        if self.remote is not None:
            if machine is None:
                machine = self.remote / f"machine-{len(set(self.machines.values()))}"
                shutil.copytree(self.store.datasets, machine / "datasets")
            store = machine
            hub = ["--hub-requests", str(self.requests_repo), "--hub-results", str(self.results_repo),
                   "--hub-wait", "60"]
        process = subprocess.Popen(
            [sys.executable, "-m", "culturelens.cli", "worker", "--store", str(store), "--backbones",
             str(self.backbones), "--lease-seconds", str(self.lease_seconds), "--batch-size", str(self.batch_size),
             "--tracks", "awareness", *hub],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=worker_env(self.queue))
        log.close()
        self.workers[process.pid] = process
        self.worker_logs[process.pid] = path
        if machine is not None:
            self.machines[process.pid] = machine
        return process.pid

    def check_alive(self) -> None:
        """A worker that exits on its own (it cannot load, it crashed) ends the soak with its log's last lines."""
        for pid, process in self.workers.items():
            if process.poll() is not None:
                tail = self.worker_logs[pid].read_text(errors="replace")[-2000:]
                raise RuntimeError(f"worker {pid} exited by itself with code {process.returncode}:\n{tail}")

    def stop_workers(self) -> None:
        for pid, process in list(self.workers.items()):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            del self.workers[pid]

    def _owner_pid(self, lease_owner: str | None) -> int | None:
        if not lease_owner:
            return None
        pid = int(lease_owner.rsplit("-", 2)[1])  # worker ids are <host>-<pid>-<random>
        return pid if pid in self.workers and self.workers[pid].poll() is None else None

    def cached_images(self, job_id: str, pid: int) -> int:
        """Cache entries whose content is one of the job's images (descriptions start with the image sha256), in
        the cache of the worker ``pid`` used."""
        shas = pq.read_table(self.store.submissions / job_id / "images.parquet", columns=["sha256"])["sha256"]
        cache = self.machines.get(pid, self.store.root) / "cache" / "embeddings.sqlite"
        if not cache.exists():
            return 0
        with sqlite3.connect(cache) as db:
            db.execute("CREATE TEMP TABLE wanted (sha TEXT PRIMARY KEY)")
            db.executemany("INSERT INTO wanted VALUES (?)", [(s,) for s in shas.to_pylist()])
            return db.execute("SELECT count(*) FROM embeddings WHERE substr(description, 1, 64) IN "
                              "(SELECT sha FROM wanted)").fetchone()[0]

    # --- the soak ---------------------------------------------------------------------------------------------
    def run(self, kills: int, workers: int, rng: random.Random, max_delay: float, timeout: float,
            replace: bool = True, jobs: int | None = None) -> None:
        """Kill a scoring worker ``kills`` times at random moments, then let the queue drain. With ``replace``
        each killed worker is replaced at once; without, the ``workers`` started first must outnumber the kills
        (quicker where starting a worker costs more than scoring, as in CI). With ``jobs``, that many submissions
        are queued first and no more later: the kills stop when the queue has drained."""
        if not replace and workers <= kills:
            raise ValueError(f"without replacement, {workers} workers cannot survive {kills} kills")
        deadline = time.monotonic() + timeout
        for _ in range(jobs or 0):
            self.submit()
        for _ in range(workers):
            self.start_worker()
        while len(self.kills) < kills:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(self.kills)} of {kills} kills after {timeout:.0f} s")
            self.check_alive()
            queued = self.store.queue.jobs()
            active = sum(j.state in ("PENDING", "RUNNING") for j in queued)
            if jobs is not None and active == 0:
                break  # every job ended before the last kill
            if jobs is None and active < workers + 1:
                self.submit()  # uploads keep arriving while workers score
                continue
            # A job on its last attempt is spared: a kill there ends it FAILED ("the worker stopped N times"),
            # which tests/test_queue.py covers; here each kill must be followed by a recovery to measure.
            scoring = [j for j in queued if j.state == "RUNNING" and self._owner_pid(j.lease_owner)
                       and not (j.message or "").startswith("claimed")
                       and j.attempts < self.store.queue.max_attempts]
            if not scoring:
                time.sleep(0.05)
                continue
            fewest = min(sum(k.job == j.id for k in self.kills) for j in scoring)  # spread the kills over jobs
            job = rng.choice([j for j in scoring if sum(k.job == j.id for k in self.kills) == fewest])
            time.sleep(rng.uniform(0, max_delay))
            now = self.store.queue.get(job.id)
            pid = self._owner_pid(now.lease_owner) if now.state == "RUNNING" else None
            if pid is None or now.lease_owner != job.lease_owner:
                continue  # it finished (or changed hands) meanwhile: not a kill while scoring
            os.kill(pid, signal.SIGKILL)
            self.workers.pop(pid).wait()
            self.kills.append(Kill(job.id, pid, now.message or "", self.cached_images(job.id, pid)))
            if replace:  # on the same machine: its store and cache survive the kill
                self.start_worker(self.machines.get(pid))
        while any(j.state in ("PENDING", "RUNNING") for j in self.store.queue.jobs()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the queue did not drain within {timeout:.0f} s")
            self.check_alive()
            time.sleep(0.2)
        self.stop_workers()

    # --- the checks -------------------------------------------------------------------------------------------
    def check(self) -> tuple[dict, list[str]]:
        """(figures, problems): problems is empty when nothing was lost, doubled or left half-written."""
        problems: list[str] = []
        jobs = {j.id: j for j in self.store.queue.jobs()}
        if self.remote is not None:  # the app's pickup: the results the remote workers published
            repo = LocalRepo(self.results_repo)
            pickup.fetch(self.store, repo, pickup.missing(self.store, repo))
        for job in jobs.values():
            if job.state not in ("FINISHED", "FAILED"):
                problems.append(f"{job.id}: ended {job.state}")
            if job.state == "FAILED" and not job.error:
                problems.append(f"{job.id}: FAILED without a reason")
        finished = [j for j in jobs.values() if j.state == "FINISHED"]
        bad_rows = 0
        shown = Catalog(self.store).query("SELECT submission_id, count(*) AS n FROM aggregates WHERE provenance = "
                                          "'scored' GROUP BY submission_id").set_index("submission_id")["n"].to_dict()
        for job in finished:
            folder = self.store.results / job.id
            files = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
            if files != RESULT_FILES:
                problems.append(f"{job.id}: results folder holds {sorted(files)}")
                continue
            images = pq.read_table(self.store.submissions / job.id / "images.parquet").to_pandas()
            expected = set(zip(images["prompt_id"], images["seed"]))
            per_image = pq.read_table(folder / "per_image.parquet").to_pandas()
            rows = per_image[per_image["seed"].notna()]
            doubled = int(rows.duplicated(["prompt_id", "seed", "metric"]).sum())
            partial = sum(set(zip(g["prompt_id"], g["seed"].astype(int))) != expected
                          for _, g in rows.groupby("metric"))
            aggregates = pq.read_table(folder / "aggregates.parquet").to_pandas()
            doubled += int(aggregates.duplicated(["metric", "slice", "slice_value"]).sum())
            if rows.empty or doubled or partial:
                problems.append(f"{job.id}: {doubled} duplicate rows, {partial} metrics missing images")
                bad_rows += doubled + partial
            ranked = int((aggregates["slice"] != "prompt").sum())  # the app's catalog keeps per-prompt rows on disk
            if shown.get(job.id) != ranked:
                problems.append(f"{job.id}: the leaderboard shows {shown.get(job.id)} aggregate rows, "
                                f"the results folder has {ranked}")
        leftovers = sorted(p.name for p in self.store.results.glob(".*"))
        for name in leftovers:
            if name.split(".")[1] in {j.id for j in finished}:
                problems.append(f"results/{name}: a temporary folder of a finished submission was left behind")

        attempts, completed = Counter(), Counter()
        for log in self.logs.glob("worker-*.log"):
            text = log.read_text(errors="replace")
            attempts.update(match.groups() for match in _ATTEMPT.finditer(text))
            completed.update(match.group(1) for match in _COMPLETED.finditer(text))
        for kill in self.kills:  # killed after its scoring completed (writing results): that work was lost, not doubled
            text = self.worker_logs[kill.pid].read_text(errors="replace")
            completed[kill.job] -= sum(match.group(1) == kill.job for match in _COMPLETED.finditer(text))
        for (job_id, attempt), count in attempts.items():
            if count > 1:
                problems.append(f"{job_id}: attempt {attempt} was run by {count} workers at once")
        scored_twice = sorted(job_id for job_id, count in completed.items() if count > 1)
        problems += [f"{job_id}: scored to the end by {completed[job_id]} workers" for job_id in scored_twice]

        last_kill = {k.job: k for k in self.kills}
        resumed = reused = present = 0
        for job in finished:
            match = _SCORED.match(job.message or "")
            kill = last_kill.get(job.id)
            if kill is None or match is None:  # never killed, or finished from results an earlier attempt wrote
                continue
            cached = int(match.group(3))
            if self.remote is not None and _machine_of(job.lease_owner, self.machines) != self.machines.get(kill.pid):
                continue  # remote: finished on another machine, whose cache is its own
            resumed += 1
            present += kill.cached_images
            reused += min(cached, kill.cached_images)
            if cached < kill.cached_images:
                problems.append(f"{job.id}: {kill.cached_images} of its embeddings were cached when its worker was "
                                f"killed, but its last attempt found only {cached} in the cache")
        stages = Counter(k.stage.split(" ")[0] if k.stage else "?" for k in self.kills)
        figures = {
            "kills": len(self.kills),
            "kill_stages": dict(stages),
            "submissions": len(jobs),
            "finished": len(finished),
            "failed": sum(j.state == "FAILED" for j in jobs.values()),
            "failed_without_reason": sum(j.state == "FAILED" and not j.error for j in jobs.values()),
            "scored_twice": len(scored_twice),
            "claims": sum(j.attempts for j in jobs.values()),
            "bad_result_rows": bad_rows,
            "takeovers": sum(j.attempts > 1 for j in finished),
            "resumed_with_cache": resumed,
            "embeddings_present_at_kill": present,
            "embeddings_reused": reused,
            "temporary_folders_left": len(leftovers),
        }
        return figures, problems


def _machine_of(lease_owner: str | None, machines: dict[int, Path]) -> Path | None:
    """The machine of the worker id ``<host>-<pid>-<random>`` (the last lease holder), if the soak started it."""
    return machines.get(int(lease_owner.rsplit("-", 2)[1])) if lease_owner else None


def worker_env(queue: str | None) -> dict[str, str]:
    """A worker's environment: offline, on the store's SQLite queue or the PostgreSQL ``queue``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("CULTURELENS_QUEUE", None)
    return {**env, "CULTURELENS_QUEUE": queue} if queue else env


def build_store(root: Path, queue: str | None = None) -> Store:
    """A store serving a 6-prompt CUBE-format dataset (the test suite's records), its queue on ``queue`` (a
    PostgreSQL URL) or in its own file."""
    store = Store(root / "store", queue=queue)
    upstream = root / "upstream.json"
    upstream.write_text(json.dumps(TINY_UPSTREAM, ensure_ascii=False), encoding="utf-8")
    cube_1k.build(str(upstream), local_folder(store.datasets, cube_1k.HUB_REPO))
    return store


def figure_lines(figures: dict) -> list[str]:
    stages = ", ".join(f"{stage}: {n}" for stage, n in sorted(figures["kill_stages"].items()))
    return [
        f"crash soak: {figures['kills']} SIGKILLs while scoring ({stages}); {figures['submissions']} submissions: "
        f"{figures['finished']} FINISHED, {figures['failed']} FAILED with a reason, 0 left hanging; "
        f"{figures['bad_result_rows']} duplicate or partial result rows; {figures['claims']} claims, "
        f"{figures['scored_twice']} jobs scored twice",
        f"crash soak: {figures['takeovers']} jobs taken over after a lease expired; {figures['resumed_with_cache']} "
        f"resumed jobs reused {figures['embeddings_reused']} of the {figures['embeddings_present_at_kill']} image "
        f"embeddings cached before the kill; {figures['temporary_folders_left']} temporary results folders left",
    ]


def small_backbones_file(folder: Path) -> Path:
    from benchmarks.harness_speed import small_backbones

    registry = small_backbones(folder)
    path = folder / "backbones.json"
    path.write_text(json.dumps({name: spec.to_dict() for name, spec in registry.items()}))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs of a scoring worker (K)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes running at once")
    parser.add_argument("--seeds", type=int, default=24, help="images per prompt (6 prompts per submission)")
    parser.add_argument("--size", type=int, default=128, help="image side in pixels")
    parser.add_argument("--lease-seconds", type=float, default=3.0, help="worker lease")
    parser.add_argument("--max-delay", type=float, default=3.0, help="longest random wait before a kill, seconds")
    parser.add_argument("--timeout", type=float, default=3600, help="give up after this many seconds")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the kill schedule")
    parser.add_argument("--backbones", default=None, help="backbones JSON (default: small random CLIP, built here)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary store and logs")
    parser.add_argument("--jobs", type=int, default=None,
                        help="queue this many submissions at the start and no more (default: keep them arriving)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--queue", default=None, metavar="URL", help="the queue on this PostgreSQL database")
    where.add_argument("--postgres", action="store_true",
                       help="the queue on a PostgreSQL server started here, in a temporary folder")
    parser.add_argument("--remote", action="store_true",
                        help="remote workers (with --queue or --postgres): each on a store of its own, fetching "
                             "submissions from a requests repo and publishing results to a results repo (local "
                             "folders standing in for the Hub's)")
    args = parser.parse_args(argv)
    if args.remote and not (args.queue or args.postgres):
        parser.error("--remote needs the queue on PostgreSQL: --queue URL or --postgres")
    root = Path(tempfile.mkdtemp(prefix="crash-soak-"))
    (root / "logs").mkdir()
    backbones = Path(args.backbones) if args.backbones else small_backbones_file(root)
    server = None
    if args.postgres:
        from tests.postgres import PostgresServer

        server = PostgresServer().start()
    queue = server.database() if server else args.queue
    soak = Soak(build_store(root, queue), backbones, root / "logs", queue=queue,
                remote=root / "remote" if args.remote else None,
                lease_seconds=args.lease_seconds, seeds=args.seeds, size=args.size)
    print(f"queue: {soak.store.queue!r}; {args.workers} workers"
          + (", each on a store of its own (no shared disk)" if args.remote else ""))
    started = time.monotonic()
    try:
        soak.run(args.kills, args.workers, random.Random(args.seed), args.max_delay, args.timeout, jobs=args.jobs)
        figures, problems = soak.check()
    finally:
        soak.stop_workers()
        soak.store.queue.close()
        if server:
            server.stop()
    for line in figure_lines(figures):
        print(line)
    print(f"({time.monotonic() - started:.0f} s; store and logs in {root})" if args.keep else
          f"({time.monotonic() - started:.0f} s)")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
