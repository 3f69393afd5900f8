"""The crash soak's machinery: a store, real ``culturelens worker`` processes with a short lease, SIGKILLs at
random points, and the checks that nothing was lost or doubled (``Soak.run``, ``Soak.check``).
``benchmarks/crash_soak.py`` runs it at scale and prints the figures; ``tests/test_crash_recovery.py``,
``tests/test_concurrency.py`` and ``tests/test_supervisor.py`` run it small (see the script's docstring for what is
checked)."""

from __future__ import annotations

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

from benchmark import layout
from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import local_folder
from benchmark.settings import HUB_OFFLINE, child_environment
from leaderboard import hub_sync, pickup
from leaderboard.catalog import Catalog
from leaderboard.repo import LocalRepo
from leaderboard.operator_settings import QUEUE, SEAL_SECRET
from leaderboard.store import Store
from culturelens.testing.tiny_models import small_backbones
from culturelens.testing.submissions import TINY_UPSTREAM, manifest, write_image

REPO = Path(__file__).resolve().parents[2]  # the workers run this checkout's code (``-m`` from here)
RESULT_FILES = set(layout.SEALED_FILES)  # a worker's results folder: the result tables, run.json and its seal
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
    @property
    def seal_secret(self) -> str | None:
        """What a remote worker seals its results with: the app's secret(s), as the operator gives each worker of
        the queue the Space's ``CULTURELENS_SEAL_SECRET`` (docs/operating/deployment.md), so that the app takes its results;
        None for a worker on the app's store, which reads the store's own key."""
        if self.remote is None:
            return None
        return " ".join(secret.decode() for secret in self.store.results_folders.keys.secrets)

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
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=worker_env(self.queue, self.seal_secret))
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


def worker_env(queue: str | None, seal_secret: str | None = None) -> dict[str, str]:
    """A worker's environment: offline, on the store's SQLite queue or the PostgreSQL ``queue``, sealing with
    ``seal_secret`` where given (else with what this process's environment or the store configures)."""
    changes = {HUB_OFFLINE: "1", QUEUE: queue, **({SEAL_SECRET: seal_secret} if seal_secret else {})}
    return {**child_environment(changes), "HF_DATASETS_OFFLINE": "1"}


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
    registry = small_backbones(folder)
    path = folder / "backbones.json"
    path.write_text(json.dumps({name: spec.to_dict() for name, spec in registry.items()}))
    return path
