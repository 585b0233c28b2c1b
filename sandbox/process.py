"""Start a sandbox in a child process and wait until it answers, and point the pipeline at it
(`make demo`, `make dev`, the benchmarks, tests/sandbox/test_server.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


@contextmanager
def running_process(
    module: str,
    port: int,
    *args: str,
    ready_path: str = "/",
    startup_seconds: float = 60.0,
    log: Path | None = None,
) -> Iterator[str]:
    """Run `python -m <module> --port <port> …`, wait until it answers HTTP, yield its base
    URL, stop it on exit. Its output goes to the file `log` (appended) where one is given,
    as for a process that runs for hours (`make dev`): an unread pipe would fill and stall
    it; else its errors are kept to say why it failed to start."""
    base = f"http://127.0.0.1:{port}"
    output = None if log is None else log.open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", module, "--port", str(port), *args],
        stdout=output or subprocess.DEVNULL,
        stderr=output or subprocess.PIPE,
        text=True,
    )
    if output is not None:
        output.close()  # the child has its own
    try:
        deadline = time.monotonic() + startup_seconds
        while True:
            if process.poll() is not None:
                said = process.stderr.read() if log is None else log.read_text()[-4000:]
                raise RuntimeError(f"{module} exited at start:\n{said}")
            try:
                httpx.get(f"{base}{ready_path}", timeout=1.0)  # any answer: it is serving
                break
            except httpx.HTTPError as exc:
                if time.monotonic() > deadline:
                    message = f"{module} not up on {base} after {startup_seconds} s"
                    raise TimeoutError(message) from exc
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def running_sandbox(port: int, *args: str, startup_seconds: float = 60.0, log: Path | None = None):
    """Yield the sandbox's base URL; stop the process on exit."""
    return running_process(
        "sandbox",
        port,
        *args,
        ready_path="/_sandbox/clock",
        startup_seconds=startup_seconds,
        log=log,
    )


#: The per-minute limits of the sandbox apply to this many seconds, and the pipeline paces
#: itself to match: the demo shows real pacing without waiting minutes for it.
RATE_WINDOW_SECONDS = 6
DEMO_CONFIG = """\
# Written by `make demo` / `make dev`: a second comment automation workspace and the
# time-scaled rate window. Keys are named here by variable, never written.
[[connections.comment]]
name = "agency"
base_url = "{base}/comment/api/v1"
api_key_env = "AGENCY_COMMENT_AUTOMATION_API_KEY"

[service.comment]
rate_window_seconds = {window}
"""


def point_at_sandbox(base: str, data: Path) -> dict[str, str]:
    """The environment (and the sync.toml it names) that points the pipeline at a sandbox
    with two comment automation workspaces and both regions of the other services."""
    (data / "demo-sync.toml").write_text(DEMO_CONFIG.format(base=base, window=RATE_WINDOW_SECONDS))
    return {
        "COMMENT_AUTOMATION_URL": f"{base}/comment/api/v1",
        "COMMENT_AUTOMATION_API_KEY": "sa_live_demo_readonly",
        "AGENCY_COMMENT_AUTOMATION_API_KEY": "sa_live_agency_readwrite",
        "CONVERSATION_URL": f"{base}/conversation",
        "CONVERSATION_JP_URL": f"{base}/conversation-jp",
        "CONVERSATION_API_KEY": "demo-apikey",
        "CONVERSATION_JP_API_KEY": "demo-apikey",
        "DATAHUB_URL": f"{base}/datahub",
        "DATAHUB_JP_URL": f"{base}/datahub-jp",
        "DATAHUB_API_KEY": "demo-apikey",
        "DATAHUB_JP_API_KEY": "demo-apikey",
        "LAKE_ROOT": str(data / "lake"),
        "WAREHOUSE_PATH": str(data / "warehouse.duckdb"),
        "SYNC_CONFIG": str(data / "demo-sync.toml"),
    }
