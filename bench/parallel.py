"""`python -m bench.parallel [--rounds 2]`: a full sync of two comment automation workspaces and
both regions of the conversation service and the data hub, with each stream's connections
landed side by side (the default, `connections_at_once` in `[service.<name>]`) and one after
another (`connections_at_once = 1` for every service: how every sync ran before), in one
invocation on one sandbox.

The sandbox is the demo's (`sandbox/process.py`: frozen, small, seed 7) with its rate limits
on in the demo's time-scaled window, and every backup and export phase taking `TASK_PHASE`
seconds: the services' asynchronous jobs take time, as real ones do. Each run is
`python -m cli sync` from an empty lake (`bench.measure`: wall, CPU, peak memory), the
two ways alternated over the rounds; the sandbox counts the requests and 429s of each run,
and every relation of the warehouse is compared with the sandbox's truth
(`pipelines/warehouse/reconcile.py`). Exit 1 if a run failed or a relation differs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys

import httpx

from assets.definitions import STREAMS
from bench.common import ROOT, free_port, measured_run, report, traffic
from pipelines.lake import Lake
from pipelines.warehouse.reconcile import reconcile
from sandbox.process import RATE_WINDOW_SECONDS, point_at_sandbox, running_sandbox

DATA = ROOT / "data" / "bench" / "parallel"
SERVICES = ("comment", "conversation", "datahub")
#: Seconds each phase of a backup or an export takes at the sandbox (its default is 1).
TASK_PHASE = 1.0
WAYS = {"side by side": 8, "one after another": 1}


def sync_toml(config: str, at_once: int) -> str:
    """The demo's sync.toml with `connections_at_once` set for every service."""
    for service in SERVICES:
        header = f"[service.{service}]\n"
        setting = f"connections_at_once = {at_once}\n"
        config = (
            config.replace(header, header + setting)
            if header in config
            else config + f"\n{header}{setting}"
        )
    return config


def one_sync(base: str, way: str, round_: int) -> dict:
    data = DATA / f"{way.replace(' ', '-')}-{round_}"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    env = point_at_sandbox(base, data)
    config = data / "demo-sync.toml"
    config.write_text(sync_toml(config.read_text(), WAYS[way]))
    env = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    env.pop("DAGSTER_HOME", None)  # as cron runs it: no Dagster run
    traffic(base, reset=True)
    measured = measured_run(["cli", "sync"], env)
    seen = traffic(base)
    truth = httpx.get(f"{base}/_sandbox/truth", timeout=60).json()
    compared = reconcile(Lake(data / "lake"), str(data / "warehouse.duckdb"), STREAMS, truth)
    return {
        "way": way,
        "round": round_,
        "exit": measured.exit_code,
        "wall s": round(measured.wall_seconds, 1),
        "CPU s": round(measured.cpu_seconds, 1),
        "peak RSS MB": round(measured.peak_rss_mb),
        "requests": seen.count(),
        "429s": seen.refused,
        "relations equal": f"{sum(r.equal for r in compared)}/{len(compared)}",
        "differ": [r.relation for r in compared if not r.equal],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sandbox_args = ["--frozen", "--rate-window", str(RATE_WINDOW_SECONDS)]
    runs = []
    with running_sandbox(
        free_port(), *sandbox_args, "--task-phase-seconds", str(TASK_PHASE), startup_seconds=300
    ) as base:
        for round_ in range(args.rounds):
            order = list(WAYS) if round_ % 2 == 0 else list(reversed(WAYS))
            runs += [one_sync(base, way, round_) for way in order]
    rows = []
    for way in WAYS:
        mine = [r for r in runs if r["way"] == way]
        rows.append(
            {
                "way": way,
                "connections_at_once": WAYS[way],
                "runs": len(mine),
                **{
                    f"median {figure}": statistics.median(r[figure] for r in mine)
                    for figure in ("wall s", "CPU s", "peak RSS MB", "requests", "429s")
                },
                "all relations equal": all(not r["differ"] and r["exit"] == 0 for r in mine),
            }
        )
    walls = {row["way"]: row["median wall s"] for row in rows}
    rows.append(
        {
            "way": "side by side / one after another",
            "median wall s": round(walls["side by side"] / walls["one after another"], 2),
        }
    )
    report("parallel", rows, tables={"runs": runs})
    return 0 if all(not r["differ"] and r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
