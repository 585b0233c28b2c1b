"""The command line, `python -m cli check | sync | push | warehouse` (`HELP` and each
command's help say what they do for a user). Settings come from the environment
(docs/settings.md). A usage mistake (a stream or record type that does not exist, days the
wrong way round) is one line and exit 2, before anything runs; a mistake in the settings is
told in one message, without a traceback (`--debug` shows it, and every step's stack trace).
What a run prints is the product's own lines (`assets/console.py`); each failure is said once,
after the run.

Each command imports what it runs when it runs (the push's jobs, the check's calls): a sync
started every hour loads the push's declarations, which its help lists, not its jobs."""

import argparse
import logging
import os
import sys
import textwrap
import traceback
import uuid
from datetime import date
from functools import partial

import duckdb

from cli import activities
from cli.live import display_wanted, live_progress, push_table, warehouse_table
from pipelines import sync
from pipelines.errors import SyncError
from pipelines.lake import Lake, verified_lake
from pipelines.lake.object_store import lake_fault
from pipelines.mistakes import misnamed
from pipelines.process import lasting_imports
from pipelines.pull.damaged import missing
from pipelines.push.plan import OUTBOUND
from pipelines.registry import PULLED
from pipelines.settings import Settings, lake_location, load_settings, services
from pipelines.sync import (
    SyncReport,
    refreshed,
    select_streams,
    selectable,
    shared_instance,
    unknown_names,
)
from pipelines.warehouse.relations import damaged_note, set_aside_damaged_files


def row_counts(warehouse_path: str, lake: Lake, relations: list[str]) -> list[tuple[str, int]]:
    """Rows per relation, read the way an analyst would: a read-only session on the file
    the refresh just put in place (a session on the file it replaced is no obstacle)."""
    with lake.connect(warehouse_path, read_only=True) as con:
        return [
            (relation, con.execute(f"SELECT count(*) FROM {relation}").fetchall()[0][0])
            for relation in relations
        ]


def print_counts(settings: Settings, lake: Lake, relations: list[str]) -> None:
    """The rows of each of `relations` in the warehouse, as a table."""
    try:
        counts = row_counts(str(settings.warehouse_path), lake, relations)
    except duckdb.Error as error:
        damaged = set_aside_damaged_files(lake)
        if not damaged:
            # Only a read-write session opened on the new file since the refresh holds it
            # so; the views are current, so the data that landed is not a failure for that.
            print(f"\nrow counts not shown: {error}", file=sys.stderr)
            return
    else:
        width = max(len(name) for name, _ in counts)
        try:
            names = {service: [c.name for c in of] for service, of in settings.connections.items()}
            short = missing(lake, PULLED, names)
        except OSError as error:  # the store went away after the landings: counts still shown
            short = {}
            fault = lake_fault(error, settings.lake_root, then="the counts may be short")
            print(f"\nfiles set aside not looked at: {fault or error}", file=sys.stderr)
        print(f"\n{'relation':<{width}}  {'rows':>10}")
        for name, rows in counts:
            held = f"  short of {'; '.join(short[name])}" if name in short else ""
            print(f"{name:<{width}}  {rows:>10,}{held}")
        return
    # A file damaged since the views were built: set aside, the counts are taken again.
    print(damaged_note(damaged))
    _, failed = refreshed(settings)
    if failed:
        print(f"\nrow counts not shown: {failed}", file=sys.stderr)
        return
    print_counts(settings, lake, relations)


def run_push_command(
    dry_run: bool,
    record_types: list[str],
    resend_in_doubt: bool = False,
    resend_keys: list[str] | None = None,
    retry_refused: bool = False,
    live: bool = False,
) -> int:
    """The push (`pipelines/push/run.py`), as a run of the `push` job where DAGSTER_HOME keeps
    an instance, so it shows in the UI; else in this process, with no Dagster imported, as a
    sync. Prints the plan's figures per record type, or each failure once. `live`: a live
    table of each record type's progress while it runs (`cli/live.py`), as a sync's."""
    settings = load_settings()
    config = {
        "dry_run": dry_run,
        "record_types": record_types,
        "resend_in_doubt": resend_in_doubt,
        "resend_keys": resend_keys or [],
        "retry_refused": retry_refused,
    }
    with lasting_imports():  # the push's jobs and its validation models
        from pipelines.push.plan import OUTCOMES
        from pipelines.push.run import run_push
    # On a terminal, a live table of each record type's progress (`cli/live.py`).
    with live_progress(live, push_table):
        if shared_instance():
            figures, failures = push_in_dagster(settings, config)
        else:
            figures, failures = {}, []
            try:
                figures = run_push(
                    lake_location(settings),
                    services(settings),
                    dry_run,
                    record_types or None,
                    resend_in_doubt=resend_in_doubt or frozenset(resend_keys or ()),
                    log=sync.console_logger().info,
                    run_id=str(uuid.uuid4()),
                    retry_refused=retry_refused,
                ).figures
            except Exception as error:  # told once, in the product's words (`told_error`)
                failures.append(sync.told_error(error, settings))
    if failures:
        for message, _ in failures:
            print(f"FAILED push: {message}", file=sys.stderr)
        return max(code for _, code in failures)  # another push busy is 3 (pipelines/errors.py)
    columns = [*OUTCOMES] + ([] if dry_run else ["sent", "refused"])
    width = {c: max(10, len(c) + 2) for c in columns}  # refused_before: no two names touch
    print(f"\n{'record type':<24}" + "".join(f"{c:>{width[c]}}" for c in columns))
    for record_type, counts in figures.items():
        print(f"{record_type:<24}" + "".join(f"{counts.get(c, 0):>{width[c]},}" for c in columns))
    print("\nrejected rows, with the field and the reason: SELECT * FROM sync.rejected")
    return 0


def push_in_dagster(settings: Settings, config: dict) -> tuple[dict, list[tuple[str, int]]]:
    """A run of the `push` job (`push_dry_run` for a dry run) in the kept Dagster instance:
    its figures, or each failure's message and exit code."""
    with lasting_imports():  # Dagster
        import dagster as dg

        from assets import push
        from assets.console import LOGGERS, console_config
        from assets.resources import build_resources
        from assets.sync import dagster_instance, failure_code, failure_reason

    name = (push.push_dry_run if config["dry_run"] else push.push).name
    job = dg.Definitions(
        jobs=push.JOBS, resources=build_resources(settings), loggers=LOGGERS
    ).resolve_job_def(name)
    with dagster_instance() as instance:
        result = job.execute_in_process(
            run_config={"ops": {"push_to_datahub": {"config": config}}, **console_config()},
            instance=instance,
            raise_on_error=False,
        )
    if result.success:
        return result.output_for_node("push_to_datahub"), []
    failures = [
        (failure_reason(event), failure_code(event))
        for event in result.all_events
        if event.is_step_failure
    ]
    if not failures:  # the run's own failure, which the console leaves to this line
        failure = next((e.message for e in result.all_events if e.is_run_failure), None)
        failures.append((failure or "the run failed", 1))
    return {}, failures


def run_sync(
    streams: list[str] | None = None,
    start: date | None = None,
    end: date | None = None,
    settings: Settings | None = None,
) -> SyncReport:
    """The core's sync (`pipelines/sync.py`), its runs as Dagster runs where DAGSTER_HOME
    keeps an instance (`assets/sync.py`), so they show in the UI; else in this process, with
    no Dagster imported."""
    runner = sync.in_process
    if shared_instance():
        with lasting_imports():  # Dagster
            from assets.sync import in_dagster
        runner = in_dagster
    return sync.run_sync(streams, start, end, settings, runner=runner)


def run_check_command() -> int:
    """A table of every connection, the lake and the shared store, ok, WARN or what to do;
    the highest exit code of the rows that failed (`Checked.exit_code`), else 0."""
    from pipelines.setup_check import check_everything

    settings = load_settings()
    service = services(settings)
    checked = check_everything(
        {s: service[s] for s in settings.connections}, settings.lake_root, settings.warehouse_sql
    )
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


#: What `python -m cli --help` says.
HELP = """Keeps a DuckDB warehouse in sync with the comment automation, conversation and
customer data hub services. Settings are environment variables and an optional sync.toml
(docs/settings.md); start with `check`."""
#: What the exit codes mean (docs/running.md, "Exit codes").
EXIT_CODES = """exit codes: 0 everything ran; 1 a service or the environment failed (a connection,
a disk, the object store); 2 a mistake in the command or the settings, nothing ran; 3 another
run holds what this one needs (run again once it is done); 4 a damaged file a person must
decide about."""
SYNC_HELP = """Pull the services' streams into the lake (Parquet, LAKE_ROOT), land what the
webhook and AI agent receivers stored, bring the warehouse's views up to date (WAREHOUSE_PATH)
and print the rows of each relation synced. Without --start and --end, each day-partitioned
stream pulls the days missing from what its service still serves, plus yesterday and today:
on an empty lake, everything; on a synced one, two days. A connection that fails fails alone,
named with the setting to fix; the others land."""
CHECK_HELP = """Check the setup before a sync: one cheap call per connection (is each key and
URL right?), a small file written and removed in the lake, the shared store (SYNC_STORE)
where set, and the webhook receiver's secret. Prints each row with ok, WARN or FAILED and
what to do, and exits with the highest code of the rows that failed."""
PUSH_HELP = """Send what changed in your outbound views (the `outbound` schema, from a folder
WAREHOUSE_SQL lists) to the data hub and the conversation service (assignments, closes): each
row validated, the newest version per key sent, nothing the service accepted sent again.
Prints per record type how many rows were new, changed, unchanged, stale, waiting, in doubt
and rejected (and sent, refused); rejected rows are in sync.rejected with the field and the
reason."""
WAREHOUSE_HELP = """Rebuild the warehouse's views (sql/ and the folders WAREHOUSE_SQL lists)
over what the lake holds, and print the rows of each relation. Sessions open on the file do
not stop it; they see the new views when they reconnect."""


class Parser(argparse.ArgumentParser):
    """A usage mistake in one line (argparse prints the whole usage above it). Descriptions
    and epilogs are printed as written: their paragraphs stay apart."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message} (`{self.prog} --help` says more)\n")


def day(text: str) -> date:
    """A day as `--start` and `--end` take it."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a day as YYYY-MM-DD (e.g. 2026-02-28), got {text!r}"
        ) from None


def parser() -> Parser:
    """Every command and option, with what each does for the user."""
    main = Parser(prog="python -m cli", description=HELP, epilog=EXIT_CODES)
    debug = (
        "show each failure's stack trace, and Dagster's every step event where DAGSTER_HOME "
        "is set (to report a bug)"
    )
    main.add_argument("--debug", action="store_true", help=debug)
    # Taken after the command too (`sync --debug`), without undoing it before the command.
    after = Parser(add_help=False)
    after.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug)
    command = partial(Parser, parents=[after])
    commands = main.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=command
    )
    commands.add_parser(
        "check", help="is each key and URL right?", description=CHECK_HELP, epilog=EXIT_CODES
    )
    relations = textwrap.fill(", ".join(stream.relation for stream in selectable()), 92)
    sync = commands.add_parser(
        "sync",
        help="pull the services' streams into the lake and the warehouse",
        description=SYNC_HELP,
        epilog=f"relations --streams knows:\n{relations}\n\n{EXIT_CODES}",
    )
    sync.add_argument(
        "--streams",
        nargs="+",
        metavar="NAME",
        help="sync only these: a service (comment, conversation, datahub: all its relations), "
        "a stream (trigger_logs) or a relation (comment.trigger_logs), listed below",
    )
    sync.add_argument(
        "--start",
        type=day,
        metavar="YYYY-MM-DD",
        help="first day the day-partitioned streams pull (UTC; default: the first day missing)",
    )
    sync.add_argument(
        "--end",
        type=day,
        metavar="YYYY-MM-DD",
        help="last day the day-partitioned streams pull (UTC; default: today)",
    )
    push = commands.add_parser(
        "push",
        help="send what changed in your outbound views to the data hub and the conversation "
        "service",
        description=PUSH_HELP,
        epilog=EXIT_CODES,
    )
    push.add_argument(
        "--dry-run", action="store_true", help="print what a push would send; send nothing"
    )
    push.add_argument(
        "--types",
        nargs="+",
        metavar="TYPE",
        help="push only these record types (default all): " + ", ".join(record_types()),
    )
    push.add_argument(
        "--resend-in-doubt",
        action="store_true",
        help="send again the behavior events a killed push may have delivered (shown as "
        "in_doubt and not sent by default: the hub may store one twice)",
    )
    push.add_argument(
        "--resend",
        nargs="+",
        metavar="KEY",
        help="send again only these rows in doubt, by their key in sync.rejected (source "
        "in_doubt); the others stay in doubt",
    )
    push.add_argument(
        "--retry-refused",
        action="store_true",
        help="send again now the rows the service refused, though unchanged (by default one "
        "waits for a change, or for its retry: an hour, doubling up to a day)",
    )
    commands.add_parser(
        "warehouse",
        help="rebuild the warehouse's views and print the rows of each relation",
        description=WAREHOUSE_HELP,
        epilog=EXIT_CODES,
    )
    activities.add_command(commands)
    return main


def record_types() -> tuple[str, ...]:
    """The record types a push sends, in its order: their declaration
    (`pipelines/push/plan.OUTBOUND`)."""
    return tuple(OUTBOUND)


def usage_mistake(args: argparse.Namespace) -> str | None:
    """What is wrong with the command as given, where nothing needs running to know it."""
    if args.command == "sync":
        if args.start and args.end and args.start > args.end:
            return f"--start {args.start} is after --end {args.end}"
        return unknown_names(args.streams or [])
    if args.command == "push":
        known = record_types()
        unknown = misnamed(args.types or [], known)
        if unknown:
            return f"--types: no record type is named {unknown}; known: {', '.join(known)}"
    return None


def main(argv: list[str] | None = None) -> int:
    commands = parser()
    args = commands.parse_args(argv)
    mistake = usage_mistake(args)
    if mistake:  # said by the command's parser, which points at its own --help
        Parser(prog=f"{commands.prog} {args.command}").error(mistake)
    # --debug: Dagster's console at DEBUG, and the core's own debug lines (the trace of each
    # failed connection, `pipelines/clients/failures.py`) on stderr, for this command only.
    core = logging.getLogger("pipelines")
    handler = logging.StreamHandler()
    level = os.environ.get("SYNC_LOG_LEVEL")
    if args.debug:
        os.environ["SYNC_LOG_LEVEL"] = "DEBUG"
        core.setLevel(logging.DEBUG)
        core.addHandler(handler)
    try:
        return run_command(args)
    except SyncError as error:  # told in full, exit code of its branch (pipelines/errors.py)
        if args.debug:
            traceback.print_exc()
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    finally:
        core.removeHandler(handler)
        core.setLevel(logging.NOTSET)
        if level is None:
            os.environ.pop("SYNC_LOG_LEVEL", None)
        else:
            os.environ["SYNC_LOG_LEVEL"] = level


def run_command(args: argparse.Namespace) -> int:
    if args.command == "check":  # it checks the lake among the rest
        return run_check_command()
    settings = load_settings()
    lake = verified_lake(settings.lake_root)
    if args.command == "activities":
        return activities.run_command(args, settings)
    if args.command == "push":
        return run_push_command(
            args.dry_run,
            args.types or [],
            args.resend_in_doubt,
            args.resend or [],
            args.retry_refused,
            live=display_wanted(args.debug),
        )
    if args.command == "warehouse":
        # On a terminal, each copied relation's closed days as the build copies them.
        with live_progress(display_wanted(args.debug), warehouse_table):
            outcome, failed = refreshed(settings)
        if failed:
            print(f"FAILED warehouse: {failed}", file=sys.stderr)
            return failed.exit_code
        print(f"warehouse: {outcome}")
        print_counts(settings, lake, [stream.relation for stream in selectable()])
        return 0
    # On a terminal, a live display of each stream's landing (`cli/live.py`); else, and
    # with --debug, the plain lines alone.
    with live_progress(display_wanted(args.debug)):
        report = run_sync(args.streams, args.start, args.end, settings)
    for relation, (first, last) in report.ranges.items():
        print(f"{relation}: {first} .. {last}")
    for note in report.notes:
        print(note)
    for what, message in report.failed.items():
        # A stream's failure names it first: said once.
        print(f"FAILED {what}: {message.removeprefix(f'{what}: ')}", file=sys.stderr)
    if report.warehouse:
        print(f"warehouse: {report.warehouse}")
        pulled, received = select_streams(args.streams)
        synced = [*pulled, *(stream for r in received for stream in r.streams)]
        print_counts(settings, lake, [stream.relation for stream in synced])
    return report.exit_code
