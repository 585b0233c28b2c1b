"""`make dev`: the Dagster UI on the demo's setup, against a live sandbox (its clock moves,
so new trigger logs, messages and member changes keep arriving for the schedules), with the
demo's SQL in the warehouse (`WAREHOUSE_SQL=demo/sql`). `python -m demo.dev`."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import demo
from demo.shop import declare_shop
from pipelines.lake import Lake
from sandbox.process import RATE_WINDOW_SECONDS, point_at_sandbox, running_sandbox


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.dev")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--ui-port", type=int, default=3000)
    parser.add_argument("--data", type=Path, default=Path("data/dev"))
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    with running_sandbox(args.port, "--rate-window", str(RATE_WINDOW_SECONDS)) as base:
        environment = os.environ | point_at_sandbox(base, args.data.resolve()) | demo.environment()
        # The shop's tables, empty: the demo's views build before anything writes them.
        declare_shop(Lake(environment["LAKE_ROOT"]))
        print(f"sandbox: {base} (live)\nDagster UI: http://127.0.0.1:{args.ui_port}")
        command = [
            sys.executable,
            "-m",
            "dagster",
            "dev",
            "-w",
            "workspace.yaml",
            "-p",
            str(args.ui_port),
        ]
        try:
            return subprocess.call(command, env=environment)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
