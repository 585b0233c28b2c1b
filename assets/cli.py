"""`python -m pipelines check` (is the setup right?), `sync [--streams …] [--start D --end D]`,
`push` and `warehouse` (rebuild the views). Settings come from the environment
(docs/settings.md). A mistake in them is told in one message, without a traceback (`--debug`
shows it, and every step's stack trace).

Each command imports what it runs when it runs (the push's jobs and validation models, the
check's calls): a sync started every hour does not load the push."""

import argparse
import logging
import os
import sys
import traceback
from datetime import date

import duckdb

from assets.sync import dagster_instance, failure_code, failure_reason, refreshed, run_sync
from pipelines.catalog import PULLED, said, set_aside_damaged_files
from pipelines.damaged import missing
from pipelines.errors import SyncError
from pipelines.lake import Lake, verified_lake
from pipelines.settings import Settings, load_settings


def row_counts(warehouse_path: str, lake: Lake) -> list[tuple[str, int]]:
    """Rows per relation, read the way an analyst would: a read-only session on the file
    the refresh just put in place (a session on the file it replaced is no obstacle)."""
    with lake.connect(warehouse_path, read_only=True) as con:
        return [
            (
                stream.relation,
                con.execute(f"SELECT count(*) FROM {stream.relation}").fetchall()[0][0],
            )
            for stream in PULLED
        ]


def print_counts(settings: Settings, lake: Lake) -> None:
    try:
        counts = row_counts(str(settings.warehouse_path), lake)
    except duckdb.Error as error:
        damaged = set_aside_damaged_files(lake)
        if not damaged:
            # Only a read-write session opened on the new file since the refresh holds it
            # so; the views are current, so the data that landed is not a failure for that.
            print(f"\nrow counts not shown: {error}", file=sys.stderr)
            return
    else:
        width = max(len(name) for name, _ in counts)
        short = missing(lake, PULLED)
        print(f"\n{'relation':<{width}}  {'rows':>10}")
        for name, rows in counts:
            held = f"  short of {'; '.join(short[name])}" if name in short else ""
            print(f"{name:<{width}}  {rows:>10,}{held}")
        return
    # A file damaged since the views were built: set aside, the counts are taken again.
    print(said(damaged))
    _, failed = refreshed(settings)
    if failed:
        print(f"\nrow counts not shown: {failed}", file=sys.stderr)
        return
    print_counts(settings, lake)


def run_push_command(dry_run: bool, record_types: list[str], resend_in_doubt: bool = False) -> int:
    """The `push` job in this process; prints the plan's figures per record type."""
    import dagster as dg

    from assets import push
    from assets.console import LOGGERS, console_config
    from assets.resources import build_resources
    from pipelines.push.plan import OUTCOMES

    name = (push.push_dry_run if dry_run else push.push).name
    job = dg.Definitions(
        jobs=push.JOBS, resources=build_resources(load_settings()), loggers=LOGGERS
    ).resolve_job_def(name)
    config = {"dry_run": dry_run, "record_types": record_types, "resend_in_doubt": resend_in_doubt}
    with dagster_instance() as instance:
        result = job.execute_in_process(
            run_config={"ops": {"push_to_datahub": {"config": config}}, **console_config()},
            instance=instance,
            raise_on_error=False,
        )
    if not result.success:
        codes = [1]  # a run that failed with no step failing
        for event in result.all_events:
            if event.is_step_failure:
                print(f"FAILED {event.step_key}: {failure_reason(event)}", file=sys.stderr)
                codes.append(failure_code(event))
        return max(codes)  # the error's: another push busy is 3 (pipelines/errors.py)
    figures = result.output_for_node("push_to_datahub")
    columns = [*OUTCOMES] + ([] if dry_run else ["sent", "refused"])
    print(f"\n{'record type':<18}" + "".join(f"{c:>10}" for c in columns))
    for record_type, counts in figures.items():
        print(f"{record_type:<18}" + "".join(f"{counts.get(c, 0):>10,}" for c in columns))
    print("\nrejected rows, with the field and the reason: SELECT * FROM sync.rejected")
    return 0


def run_check_command() -> int:
    """A table of every connection, the lake and the shared store, ok, WARN or what to do;
    the highest exit code of the rows that failed (`Checked.exit_code`), else 0."""
    from assets.resources import build_resources
    from pipelines.check import check_everything

    settings = load_settings()
    resources = build_resources(settings)
    checked = check_everything({s: resources[s] for s in settings.connections}, settings.lake_root)
    widths = [max(len(getattr(c, f)) for c in checked) for f in ("service", "connection", "url")]
    for c in checked:
        cells = (c.service, c.connection, c.url)
        line = "  ".join(f"{cell:<{w}}" for cell, w in zip(cells, widths, strict=True))
        print(f"{line}  {c.result}")
    for c in checked:
        if c.result != "ok":
            print(
                f"\n{c.result} {c.service} {c.connection}: {c.problem or c.warning}",
                file=sys.stderr,
            )
    if not any(settings.connections.values()):
        print(
            "\nno connection is set: set COMMENT_AUTOMATION_URL, CONVERSATION_URL, DATAHUB_URL "
            "(docs/settings.md)",
            file=sys.stderr,
        )
        return 1
    return max((c.exit_code for c in checked if not c.ok), default=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines", description=__doc__)
    parser.add_argument(
        "--debug", action="store_true", help="log every step event and show stack traces"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="one call per connection: is each key and URL right?")
    sync = commands.add_parser("sync", help="pull every stream (or those named) into the lake")
    sync.add_argument(
        "--streams",
        nargs="+",
        metavar="NAME",
        help="service (comment), stream (trigger_logs) or relation (comment.trigger_logs)",
    )
    sync.add_argument("--start", type=date.fromisoformat, help="first day, YYYY-MM-DD (UTC)")
    sync.add_argument("--end", type=date.fromisoformat, help="last day, YYYY-MM-DD (UTC)")
    push = commands.add_parser("push", help="send what changed in the outbound views")
    push.add_argument("--dry-run", action="store_true", help="plan and report; send nothing")
    push.add_argument("--types", nargs="+", metavar="TYPE", help="record types (default all)")
    push.add_argument(
        "--resend-in-doubt",
        action="store_true",
        help="send again the behavior events a killed run may have delivered (in_doubt)",
    )
    commands.add_parser("warehouse", help="rebuild the warehouse views from sql/ and WAREHOUSE_SQL")
    args = parser.parse_args(argv)
    # --debug: Dagster's console at DEBUG, and the core's own debug lines (the trace of each
    # failed connection, `pipelines/clients/failures.py`) on stderr, for this command only.
    core = logging.getLogger("pipelines")
    handler = logging.StreamHandler()
    if args.debug:
        os.environ["SYNC_LOG_LEVEL"] = "DEBUG"
        core.setLevel(logging.DEBUG)
        core.addHandler(handler)
    try:
        return run_command(parser, args)
    except SyncError as error:  # told in full, exit code of its branch (pipelines/errors.py)
        if args.debug:
            traceback.print_exc()
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    finally:
        core.removeHandler(handler)
        core.setLevel(logging.NOTSET)


def run_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "check":  # it checks the lake among the rest
        return run_check_command()
    settings = load_settings()
    lake = verified_lake(settings.lake_root)
    if args.command == "push":
        return run_push_command(args.dry_run, args.types or [], args.resend_in_doubt)
    if args.command == "warehouse":
        outcome, failed = refreshed(settings)
        if failed:
            print(f"FAILED warehouse: {failed}", file=sys.stderr)
            return failed.exit_code
        print(f"warehouse: {outcome}")
        print_counts(settings, lake)
        return 0
    if args.start and args.end and args.start > args.end:
        parser.error("--start is after --end")
    report = run_sync(args.streams, args.start, args.end, settings)
    for relation, (first, last) in report.ranges.items():
        print(f"{relation}: {first} .. {last}")
    for note in report.notes:
        print(note)
    for step, message in report.failed.items():
        print(f"FAILED {step}: {message}", file=sys.stderr)
    if report.warehouse:
        print(f"warehouse: {report.warehouse}")
        print_counts(settings, lake)
    return report.exit_code
