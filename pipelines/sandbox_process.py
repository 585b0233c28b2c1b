"""Start a sandbox in a child process and wait until it answers (demo, benchmarks, tests)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx


@contextmanager
def running_sandbox(port: int, *args: str, startup_seconds: float = 60.0) -> Iterator[str]:
    """Yield the sandbox's base URL; stop the process on exit."""
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox", "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + startup_seconds
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"sandbox exited at start:\n{process.stderr.read()}")
            try:
                httpx.get(f"{base}/_sandbox/clock", timeout=1.0).raise_for_status()
                break
            except httpx.HTTPError as exc:
                if time.monotonic() > deadline:
                    message = f"sandbox not up on {base} after {startup_seconds} s"
                    raise TimeoutError(message) from exc
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
