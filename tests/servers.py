"""Servers of the product started as a user starts them (`python -m <module> --port P`), in
child processes a test may kill: the webhook receiver, the agent."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class ServerProcess:
    url: str  # the endpoint
    process: subprocess.Popen
    log: Path


Spawn = Callable[[dict[str, str]], ServerProcess]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def spawner(
    module: str, path: str, logs: Path
) -> Iterator[Callable[[dict[str, str]], ServerProcess]]:
    """`spawn(env)` starts `python -m module` on a free port and returns once `/health`
    answers; every server started is stopped at the end."""
    started: list[subprocess.Popen] = []

    def spawn(env: dict[str, str]) -> ServerProcess:
        port = free_port()
        log = logs / f"{module}-{port}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", module, "--port", str(port)],
                cwd=ROOT,
                env=os.environ | env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        started.append(process)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        # One client for every look: a client made per look costs 30 ms of CPU or more.
        with httpx.Client(timeout=1) as health:
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"{module} exited:\n{log.read_text()}")
                try:
                    if health.get(f"{base}/health").status_code == 200:
                        return ServerProcess(f"{base}{path}", process, log)
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{module} did not start:\n{log.read_text()}")
                time.sleep(0.05)

    yield spawn
    for process in started:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)
