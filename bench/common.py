"""What every benchmark shares: a sandbox of its own, the pipeline pointed at it, the
sandbox's own request counts, and one way to report (a printed table and a JSON file)."""

from __future__ import annotations

import json
import os
import platform
import resource
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from sandbox.process import running_sandbox

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
#: Sandbox keys (sandbox README): read-only comment automation key, conversation/data hub key.
COMMENT_KEY = "sa_live_demo_readonly"
SERVICE_KEY = "demo-apikey"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def sandbox(*args: str, scale: str = "large") -> Iterator[str]:
    """A frozen sandbox of its own on a free port (large data takes a few seconds to build)."""
    with running_sandbox(
        free_port(), "--scale", scale, "--frozen", *args, startup_seconds=300
    ) as base:
        yield base


def pipeline_env(
    base: str, data: Path, services: tuple[str, ...], options: dict[str, dict] | None = None
) -> dict[str, str]:
    """Environment pointing the pipeline at the sandbox: the `default` connection of each
    service named, a lake and a Dagster instance (`DAGSTER_HOME`, so runs can be read back)
    under `data`, and `[service.X]` options (pace, rate window)."""
    (data / "dagster").mkdir(parents=True, exist_ok=True)
    config = data / "sync.toml"
    config.write_text(
        "".join(
            f"[service.{service}]\n"
            + "".join(f"{name} = {json.dumps(value)}\n" for name, value in values.items())
            for service, values in (options or {}).items()
        )
    )
    tomllib.loads(config.read_text())  # what we wrote must read back
    urls = {
        "comment": ("COMMENT_AUTOMATION_URL", "/comment/api/v1", "COMMENT_AUTOMATION_API_KEY"),
        "conversation": ("CONVERSATION_URL", "/conversation", "CONVERSATION_API_KEY"),
        "datahub": ("DATAHUB_URL", "/datahub", "DATAHUB_API_KEY"),
    }
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith(("_URL", "_API_KEY")) and key != "SYNC_CONFIG"
    }
    for service in services:
        url_var, mount, key_var = urls[service]
        env[url_var] = f"{base}{mount}"
        env[key_var] = COMMENT_KEY if service == "comment" else SERVICE_KEY
    env.update(
        LAKE_ROOT=str(data / "lake"),
        WAREHOUSE_PATH=str(data / "warehouse.duckdb"),
        SYNC_CONFIG=str(config),
        SYNC_LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
        DAGSTER_HOME=str(data / "dagster"),
    )
    return env


@dataclass
class Traffic:
    """What the sandbox was asked, per path, and what its rate limiter refused."""

    paths: list[dict]
    refused: int

    def count(self, prefix: str = "", method: str | None = None) -> int:
        return sum(
            p["count"]
            for p in self.paths
            if p["path"].startswith(prefix) and (method is None or p["method"] == method)
        )

    def span(self, prefix: str = "") -> float:
        """Seconds from the first to the last request under `prefix`."""
        chosen = [p for p in self.paths if p["path"].startswith(prefix)]
        return max(p["last"] for p in chosen) - min(p["first"] for p in chosen) if chosen else 0


def traffic(base: str, reset: bool = False) -> Traffic:
    seen = httpx.get(f"{base}/_sandbox/requests", timeout=30).raise_for_status().json()
    if reset:
        httpx.delete(f"{base}/_sandbox/requests", timeout=30).raise_for_status()
    return Traffic(seen["paths"], seen["refused"])


@dataclass
class Measured:
    wall_seconds: float
    peak_rss_mb: float
    exit_code: int
    #: User and system CPU of the process and of the children it waited for.
    cpu_seconds: float = 0.0


def measured_run(
    module_args: list[str], env: dict[str, str], data: Path | None = None, cwd: Path = ROOT
) -> Measured:
    """Run `python -m <module> <args>` in a process of its own and measure it: its wall time
    from start to exit (the interpreter's start and end included, as a user waits for them),
    its peak memory as the process saw it (bench.measure: the pipeline's alone, not the
    benchmark's or the sandbox's), and its CPU, what this process's waited-for children
    gained meanwhile (the sandbox, still running, is not among them). Its figures and output
    go to `data`, by default the folder holding the lake. `cwd`: the checkout it runs from
    (another commit's, to compare with)."""
    data = data or Path(env["LAKE_ROOT"]).parent
    out = data / "measured.json"
    out.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(data / "output.log", "w") as log:  # what the command printed, for a look later
        completed = subprocess.run(
            [sys.executable, "-m", "bench.measure", str(out), *module_args],
            env=env,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if not out.exists():
        raise RuntimeError(f"{module_args} exited {completed.returncode}; see {data}/output.log")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return Measured(
        wall_seconds=wall,
        peak_rss_mb=json.loads(out.read_text())["peak_rss_mb"],
        exit_code=completed.returncode,
        cpu_seconds=cpu,
    )


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    memory_kb = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kb / 2**20, 1),
        "python": platform.python_version(),
        "system": platform.platform(),
    }


def commit() -> str:
    run = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    )
    return run.stdout.strip() or "unknown"


def report(
    figure: str, rows: list[dict], tables: dict[str, list[dict]] | None = None, **details
) -> dict:
    """Print the figure's table (and `tables`, more tables by title) and write them, with the
    machine, to bench/results/<figure>.json."""
    print_table(figure, rows)
    for title, table in (tables or {}).items():
        print_table(title, table)
    for name, value in details.items():
        print(f"  {name}: {value}")
    return write_document(figure, rows, tables or {}, details)


def write_document(
    figure: str, rows: list[dict], tables: dict, details: dict, path: Path | None = None
) -> dict:
    """The figure's document (its rows, `tables`, `details`, when, at which commit, on which
    machine), written to `path` (default bench/results/<figure>.json)."""
    document = {
        "figure": figure,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": machine(),
        "rows": rows,
        **tables,
        **details,
    }
    path = path or RESULTS / f"{figure}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return document


def wait_for_health(base: str, process: subprocess.Popen, log: Path, seconds: float) -> None:
    """Until the server started as `process` answers `/health` at `base`; one that exits or
    is not serving within `seconds` fails naming its log."""
    deadline = time.monotonic() + seconds
    # One client for every look: a client made per look costs 30 ms of CPU or more.
    with httpx.Client(timeout=1) as health:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args} exited {process.returncode}: see {log}")
            try:
                health.get(f"{base}/health").raise_for_status()
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"not serving at {base} after {seconds} s: see {log}"
                    ) from None
                time.sleep(0.2)


def stop(process: subprocess.Popen, seconds: float) -> None:
    """Ask `process` to end; killed if it has not within `seconds`."""
    process.terminate()
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def print_table(title: str, rows: list[dict]) -> None:
    columns = list(dict.fromkeys(name for row in rows for name in row))
    cells = [[_cell(row.get(name)) for name in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(f"\n{title}")
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
