"""Servers of the product started as a user starts them (`python -m <module> --port P`), in
child processes a test may kill: the webhook receiver, the agent."""

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.common import wait_for_health

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
        wait_for_health(base, process, log, seconds=60)
        return ServerProcess(f"{base}{path}", process, log)

    yield spawn
    for process in started:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)
