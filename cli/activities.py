"""The command line's `activities plan|apply` (docs/activities.md): the activity files of
ACTIVITIES_DIR planned against the comment automation service, and applied, in this process
with no Dagster (the UI's `activities` job is `assets/activities.py`)."""

import argparse
import getpass
import os
import sys

from cli.live import apply_table, display_wanted, live_progress
from pipelines.activities import (
    Outcome,
    Refused,
    activities_dir,
    apply_activities,
    plan_activities,
)
from pipelines.settings import Settings, lake_location, services

LOG_QUERY = "SELECT * FROM sync.activity_changes ORDER BY applied_at DESC"
ACTIVITIES_HELP = """Keep the comment automation's activities as code: one TOML file per
activity in ACTIVITIES_DIR (docs/activities.md), planned against each connection's
activities, then applied."""
PLAN_HELP = """Compare the files of ACTIVITIES_DIR with each connection's activities and
print what `apply` would create, change, activate or delete, and what was changed at the
service by hand since the last apply (drift). Writes nothing."""
APPLY_HELP = """Make each connection's activities match the files of ACTIVITIES_DIR, as `plan`
prints it, and log each change in sync.activity_changes. Making an activity active and
deleting one each need their flag. The comment automation key must be allowed to write (a
read-only key is refused with 403)."""


def add_command(commands: argparse._SubParsersAction) -> None:
    """`activities plan` and `activities apply` in the command line's table."""
    parser = commands.add_parser(
        "activities",
        help="make the comment automation activities match ACTIVITIES_DIR (plan, apply)",
        description=ACTIVITIES_HELP,
    )
    steps = parser.add_subparsers(dest="step", required=True, parser_class=type(parser))
    steps.add_parser(
        "plan",
        help="what apply would change, per connection, and drift; no write",
        description=PLAN_HELP,
    )
    apply = steps.add_parser(
        "apply", help="make the service match the folder", description=APPLY_HELP
    )
    apply.add_argument(
        "--allow-activate",
        action="store_true",
        help="allow making activities active (the account replies to real people)",
    )
    apply.add_argument(
        "--allow-delete",
        action="store_true",
        help="allow deleting activities (and their trigger logs at the service)",
    )
    apply.add_argument("--by", help="who applies, for the log (default: the OS user)")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    service, location = services(settings)["comment"], lake_location(settings)
    lake = location.lake()
    folder = activities_dir()
    print(f"activities: {folder} (ACTIVITIES_DIR)")
    if args.step == "plan":
        outcome = plan_activities(service, lake, folder)
        _print(outcome, flags=True)
        if any(p.changes for p in outcome.plans):
            print("\nto make it so: python -m cli activities apply")
        return 0
    # A line per change made as it is made (stderr: stdout is the outcome), and on a
    # terminal a live table per connection (`cli/live.py`).
    try:
        with live_progress(display_wanted(args.debug), apply_table):
            outcome = apply_activities(
                service,
                lake,
                folder,
                by=args.by or _os_user(),
                allow_activate=args.allow_activate,
                allow_delete=args.allow_delete,
                log=lambda line: print(line, file=sys.stderr),
            )
    except Refused as refused:
        for line in refused.lines:
            print(f"error: {line}", file=sys.stderr)
        return refused.exit_code
    _print(outcome, flags=False)
    if outcome.applied:
        print(f"\napplied {outcome.applied} change(s); the log: {LOG_QUERY}")
        # The changes are made: a refresh that fails is reported, not failed (as a push's).
        # Imported here: the push's run is not loaded by the other commands.
        from pipelines.push.run import refresh

        print(f"warehouse: {refresh(location)}")
    else:
        print("\nnothing to apply: the service matches the folder")
    return 0


def _print(outcome: Outcome, flags: bool) -> None:
    if not outcome.plans:
        print("no activity files")
    for plan in outcome.plans:
        print(f"\nconnection {plan.connection}")
        for line in plan.lines(flags=flags):
            print(f"  {line}")


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a container)
        return f"uid {os.getuid()}"
