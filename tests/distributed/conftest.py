"""A deployment on several hosts, every server started here from its PyPI package
(docs/deployment.md): Postgres for Dagster's storage and the shared store (`pgserver`), an S3
store for the lake (moto's), the sandbox services, and a Dask scheduler with two workers.
Each worker is a host of its own: its own working directory, temporary folder, home and
DAGSTER_HOME, the repository as its image, the same settings as every other host."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import yaml

# The servers the other tests start, started the same way here.
from tests.pipelines.conftest import (  # noqa: F401
    LiveSandbox,
    _frozen_by_day,
    frozen_sandbox,
    start_sandbox,
    sync_env,
)
from tests.pipelines.test_object_store import s3_endpoint, s3_root  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
#: How long a server may take to start on a busy machine: a bound on a wait, not a figure.
START_SECONDS = 180
WORKERS = ("worker-1", "worker-2")


@dataclass
class Host:
    """The folders of one host; no two hosts share one."""

    folder: Path

    def __post_init__(self) -> None:
        for name in ("work", "tmp", "home", "state", "dagster"):
            (self.folder / name).mkdir(parents=True)

    @property
    def work(self) -> Path:
        return self.folder / "work"

    def environment(self, shared: dict[str, str]) -> dict[str, str]:
        """The shared settings, with this host's own folders and the repository as its code."""
        return shared | {
            "HOME": str(self.folder / "home"),
            "XDG_STATE_HOME": str(self.folder / "state"),
            "TMPDIR": str(self.folder / "tmp"),
            "DAGSTER_HOME": str(self.folder / "dagster"),
            "WAREHOUSE_PATH": str(self.folder / "warehouse.duckdb"),
            "SYNC_CONFIG": str(self.folder / "sync.toml"),
            "PYTHONPATH": str(ROOT),
        }


@dataclass
class Deployment:
    """The servers of a test, the settings every host has, and how to reach its Dagster."""

    sandbox: LiveSandbox
    lake_root: str
    #: Each Dask worker's name and the process id its tasks run in.
    worker_pids: dict[str, int]
    launcher: Host
    shared: dict[str, str]
    logs: list[Path] = field(default_factory=list)

    def tails(self) -> str:
        return tails(self.logs)

    def start_job(self, job: str, *options: str) -> tuple[subprocess.Popen, Path]:
        """A run of `job` as the deployment's run launcher starts one, not waited for: a
        process that loads the code location with the deployment's settings (so its executor
        is Dask's) and orchestrates the run from there; its steps go to the cluster. The
        process, and the log it writes; `options`, more of `dagster job execute`'s."""
        log = self.launcher.folder / f"{job}.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "dagster", "job", "execute"),
                    *("-m", "assets.definitions", "-a", "defs", "-j", job, "-d", str(ROOT)),
                    *options,
                ],
                cwd=self.launcher.work,
                env=self.launcher.environment(self.shared),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return process, log


def tails(logs: list[Path], characters: int = 3000) -> str:
    """The end of each server's log, for a failing assertion's message."""
    return "\n".join(f"--- {log}\n{log.read_text()[-characters:]}" for log in logs)


def instance_settings(storage_url: str) -> str:
    """The repository's `dagster.yaml` with a deployment's storage: runs and events in
    Postgres. What an instance keeps on disk (artifacts, captured logs) goes under the
    DAGSTER_HOME of the process that opens it: dagster-dask hands each worker the launching
    instance's settings, which would otherwise name the launcher's folder."""
    settings = yaml.safe_load((ROOT / "instance" / "dagster.yaml").read_text())
    # dagster-postgres is written for psycopg2, which SQLAlchemy 2.1 no longer picks for a
    # bare `postgresql://`: psycopg 3 refuses the parameter of the NOTIFY each event sends.
    storage_url = urlunsplit(urlsplit(storage_url)._replace(scheme="postgresql+psycopg2"))
    on_this_host = {"config": {"base_dir": {"env": "DAGSTER_HOME"}}}
    settings |= {
        "storage": {"postgres": {"postgres_url": storage_url}},
        "local_artifact_storage": {
            "module": "dagster._core.storage.root",
            "class": "LocalArtifactStorage",
            **on_this_host,
        },
        "compute_logs": {
            "module": "dagster._core.storage.local_compute_log_manager",
            "class": "LocalComputeLogManager",
            **on_this_host,
        },
    }
    return yaml.safe_dump(settings)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def _started(command: list[str], host: Host, env: dict, stack: ExitStack) -> subprocess.Popen:
    """A server in `host`'s working directory, logging to a file there; stopped with `stack`."""
    log = (host.folder / "server.log").open("w")
    stack.callback(log.close)
    process = subprocess.Popen(
        command, cwd=host.work, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
    )
    stack.callback(_stop, process)
    return process


def _scheduler_address(process: subprocess.Popen, file: Path, log: Path) -> str:
    """The address the scheduler writes once it listens, on a free port of its choosing."""
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            return json.loads(file.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError):  # not yet written, or not whole
            pass
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"the Dask scheduler did not start\n{log.read_text()}"
        time.sleep(0.1)


def _worker_pids(address: str) -> dict[str, int]:
    """Each worker's name and process, once both have joined the scheduler."""
    from distributed import Client

    with Client(address, timeout=f"{START_SECONDS}s") as client:
        client.wait_for_workers(len(WORKERS), timeout=START_SECONDS)
        pids = client.run(os.getpid)
        names = {a: w["name"] for a, w in client.scheduler_info()["workers"].items()}
    return {names[worker]: pid for worker, pid in pids.items()}


@pytest.fixture
def deployment(
    frozen_sandbox,  # noqa: F811
    sync_env,  # noqa: F811
    s3_root,  # noqa: F811
    shared_store,
    tmp_path,
    monkeypatch,
) -> Iterator[Deployment]:
    """The sandbox, the lake in a bucket, a database of the test's own holding Dagster's
    storage and the shared store (pipelines/state/shared_store.py), as one Postgres serves a
    deployment; a Dask scheduler and two workers. This process's environment is a host's."""
    sync_env(frozen_sandbox)
    monkeypatch.setenv("LAKE_ROOT", s3_root)
    monkeypatch.setenv("SYNC_STORE", shared_store)
    settings = instance_settings(shared_store)
    # The workers serve no dashboard, so nothing reads what their sampling profiler
    # gathers at every step (docs/deployment.md, "Executors").
    shared = os.environ.copy() | {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}

    def host(name: str) -> Host:
        made = Host(tmp_path / name)
        (made.folder / "dagster" / "dagster.yaml").write_text(settings)
        shutil.copy(tmp_path / "sync.toml", made.folder / "sync.toml")
        return made

    python = [sys.executable, "-m"]
    with ExitStack() as stack:
        scheduler = host("scheduler")
        scheduler_file = scheduler.folder / "scheduler.json"
        process = _started(
            [
                *python,
                "distributed.cli.dask_scheduler",
                *("--host", "127.0.0.1", "--port", "0", "--no-dashboard"),
                *("--scheduler-file", str(scheduler_file)),
                # Ends itself if this process is killed before it can stop it.
                *("--idle-timeout", "900"),
            ],
            scheduler,
            scheduler.environment(shared),
            stack,
        )
        logs = [scheduler.folder / "server.log"]
        address = _scheduler_address(process, scheduler_file, logs[0])
        shared |= {"DAGSTER_EXECUTOR": "dask", "DASK_SCHEDULER_ADDRESS": address}
        for name in WORKERS:
            worker = host(name)
            _started(
                [
                    *python,
                    "distributed.cli.dask_worker",
                    address,
                    *("--name", name, "--nthreads", "1", "--nworkers", "1"),
                    # The worker is this process: the one its tasks, Dagster's steps, run in.
                    *("--no-nanny", "--no-dashboard", "--host", "127.0.0.1"),
                    *("--local-directory", str(worker.folder / "tmp")),
                    # Ends itself if the scheduler is gone.
                    *("--death-timeout", "60"),
                ],
                worker,
                worker.environment(shared),
                stack,
            )
            logs.append(worker.folder / "server.log")
        try:
            pids = _worker_pids(address)
        except (TimeoutError, OSError) as late:
            raise AssertionError(f"the Dask workers did not join: {late}\n{tails(logs)}") from late
        yield Deployment(
            sandbox=frozen_sandbox,
            lake_root=s3_root,
            worker_pids=pids,
            launcher=host("launcher"),
            shared=shared,
            logs=logs,
        )
