"""Start a sandbox in a child process and wait until it answers, and point the pipeline at it
(`make demo`, `make dev`, the benchmarks, tests/sandbox/test_server.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

#: What is kept of a child's output when no log file is given: its end, enough for the
#: traceback of a failed start.
KEPT_OUTPUT_CHARS = 4000


class Drain:
    """A child's pipe read on a thread of its own until it closes, its last lines kept (about
    `KEPT_OUTPUT_CHARS`). A pipe that nobody reads fills (64 KiB on Linux) and then blocks the
    child at its next line: a receiver that logs a line a request stops answering after some
    1,700 requests."""

    def __init__(self, stream) -> None:
        self._lines: deque[str] = deque()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        kept = 0
        for line in stream:
            self._lines.append(line)
            kept += len(line)
            while kept > KEPT_OUTPUT_CHARS and len(self._lines) > 1:
                kept -= len(self._lines.popleft())

    def text(self, wait: float = 5.0) -> str:
        """What was kept, once the child's end of the pipe is closed (or after `wait` s)."""
        self._thread.join(wait)
        return "".join(self._lines)


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
    as for a process that runs for hours (`make dev`); else its output is read as it comes
    and its end kept (`Drain`) to say why it failed to start."""
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
    errors = Drain(process.stderr) if log is None else None
    try:
        deadline = time.monotonic() + startup_seconds
        # One client for every look: a client made per look costs 30 ms of CPU or more.
        with httpx.Client(timeout=1.0) as looking:
            while True:
                if process.poll() is not None:
                    said = errors.text() if errors else log.read_text()[-KEPT_OUTPUT_CHARS:]
                    raise RuntimeError(f"{module} exited at start:\n{said}")
                try:
                    looking.get(f"{base}{ready_path}")  # any answer: it is serving
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
