"""`make demo`: start a sandbox, run the full sync against it, show the warehouse, then push
a demo shop's records to the data hub, twice (the second run sends nothing).

The sandbox runs frozen (its data stops at start), so the warehouse must equal its ground
truth exactly; the table says so per relation. Two comment automation workspaces and both
regions of the other services are synced, so every row shows which connection it came from.
"""

import argparse
import os
import sys
from pathlib import Path

import httpx

from pipelines import definitions
from pipelines.__main__ import run_push_command
from pipelines.lake import Lake
from pipelines.push.shop import generate_shop
from pipelines.reconcile import reconcile
from pipelines.sandbox_process import RATE_WINDOW_SECONDS, point_at_sandbox, running_sandbox
from pipelines.settings import load_settings
from pipelines.sync import run_sync


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.demo")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--data", type=Path, default=Path("data"))
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    sandbox_args = ["--frozen", "--rate-window", str(RATE_WINDOW_SECONDS)]
    with running_sandbox(args.port, *sandbox_args, "--task-phase-seconds", "0.2") as base:
        print(f"sandbox: {base} (frozen, small, seed 7; rate limits per {RATE_WINDOW_SECONDS} s)")
        os.environ.update(point_at_sandbox(base, args.data))
        settings = load_settings()
        print("sync: pulling every stream of the three services into the lake …")
        report = run_sync(settings=settings)
        for step, message in report.failed.items():
            print(f"FAILED {step}: {message}", file=sys.stderr)
        truth = httpx.get(f"{base}/_sandbox/truth", timeout=60).json()
        shop = generate_shop(Lake(settings.lake_root))
        print(f"\ndemo shop (the brand's own system): {sum(shop.values()):,} rows in shop.*")
        print("push: the outbound views (sql/outbound) to the data hub …")
        pushed = run_push_command(dry_run=False, record_types=[])
        print("push again: nothing changed, so nothing is sent …")
        again = run_push_command(dry_run=False, record_types=[])
    rows = reconcile(str(settings.warehouse_path), definitions.STREAMS, truth)
    width = max(len(r.relation) for r in rows)
    print(f"\n{'relation':<{width}}  {'rows':>9}  {'truth':>9}")
    for r in rows:
        truth_rows = "-" if r.truth is None else f"{r.truth:,}"
        mark = "ok" if r.equal else "DIFFERS"
        print(f"{r.relation:<{width}}  {r.rows:>9,}  {truth_rows:>9}  {mark}")
    print(
        f"\nlake: {settings.lake_root}/  warehouse: {settings.warehouse_path}\n"
        "Query it read-only (an open session never blocks a sync):\n"
        f"  .venv/bin/python -c \"import duckdb; con = duckdb.connect('{settings.warehouse_path}', "
        "read_only=True); print(con.sql('SELECT * FROM marts.activity_performance LIMIT 5'))\"\n"
        "Open the Dagster UI on the same setup: make dev"
    )
    return 0 if report.ok and all(r.equal for r in rows) and pushed == again == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
