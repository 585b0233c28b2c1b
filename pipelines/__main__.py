"""`python -m pipelines sync [--streams …] [--start D --end D]` and `python -m pipelines
warehouse` (rebuild the views). Settings come from the environment (README, "Settings")."""

import argparse
import sys
from datetime import date

import duckdb

from pipelines import definitions
from pipelines.lake import Lake
from pipelines.settings import load_settings
from pipelines.sync import run_sync
from pipelines.warehouse import Warehouse


def row_counts(warehouse_path: str) -> list[tuple[str, int]]:
    """Rows per relation, read the way an analyst would: a read-only session."""
    with duckdb.connect(warehouse_path, read_only=True) as con:
        return [
            (
                stream.relation,
                con.execute(f"SELECT count(*) FROM {stream.relation}").fetchall()[0][0],
            )
            for stream in definitions.STREAMS
        ]


def print_counts(warehouse_path: str) -> None:
    counts = row_counts(warehouse_path)
    width = max(len(name) for name, _ in counts)
    print(f"\n{'relation':<{width}}  {'rows':>10}")
    for name, rows in counts:
        print(f"{name:<{width}}  {rows:>10,}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    sync = commands.add_parser("sync", help="pull every stream (or those named) into the lake")
    sync.add_argument(
        "--streams",
        nargs="+",
        metavar="NAME",
        help="service (comment), stream (trigger_logs) or relation (comment.trigger_logs)",
    )
    sync.add_argument("--start", type=date.fromisoformat, help="first day, YYYY-MM-DD (UTC)")
    sync.add_argument("--end", type=date.fromisoformat, help="last day, YYYY-MM-DD (UTC)")
    commands.add_parser("warehouse", help="rebuild the warehouse views from sql/")
    args = parser.parse_args(argv)

    settings = load_settings()
    if args.command == "warehouse":
        Warehouse(settings.warehouse_path, Lake(settings.lake_root), definitions.STREAMS).refresh()
        print_counts(str(settings.warehouse_path))
        return 0
    if args.start and args.end and args.start > args.end:
        parser.error("--start is after --end")
    report = run_sync(args.streams, args.start, args.end, settings)
    for relation, (first, last) in report.ranges.items():
        print(f"{relation}: {first} .. {last}")
    for step, message in report.failed.items():
        print(f"FAILED {step}: {message}", file=sys.stderr)
    print(f"warehouse: {report.warehouse}")
    if settings.warehouse_path.exists():
        print_counts(str(settings.warehouse_path))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
