"""Comment automation activities as code (pipelines/activities/, docs/activities.md): the
command line's `activities plan|apply`, and the `activities` job of the Dagster UI, which
plans by default and applies with `apply: true`."""

import argparse
import getpass
import os
import sys

import dagster as dg

from assets.failures import tells_errors
from assets.resources import CommentAutomationResource, LakeResource, build_resources
from pipelines.activities import (
    Outcome,
    Refused,
    activities_dir,
    apply_activities,
    plan_activities,
)
from pipelines.push.run import refresh
from pipelines.settings import Settings

LOG_QUERY = "SELECT * FROM sync.activity_changes ORDER BY applied_at DESC"


def add_command(commands: argparse._SubParsersAction) -> None:
    """`activities plan` and `activities apply` in the command line's table."""
    parser = commands.add_parser(
        "activities",
        help="make the comment automation activities match ACTIVITIES_DIR (plan, apply)",
    )
    steps = parser.add_subparsers(dest="step", required=True)
    steps.add_parser("plan", help="what apply would change, per connection, and drift; no write")
    apply = steps.add_parser("apply", help="make the service match the folder")
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
    resources = build_resources(settings)
    service, lake = resources["comment"], resources["lake"].lake()
    folder = activities_dir()
    print(f"activities: {folder} (ACTIVITIES_DIR)")
    if args.step == "plan":
        outcome = plan_activities(service, lake, folder)
        _print(outcome, flags=True)
        if any(p.changes for p in outcome.plans):
            print("\nto make it so: python -m pipelines activities apply")
        return 0
    try:
        outcome = apply_activities(
            service,
            lake,
            folder,
            by=args.by or _os_user(),
            allow_activate=args.allow_activate,
            allow_delete=args.allow_delete,
        )
    except Refused as refused:
        for line in refused.lines:
            print(f"error: {line}", file=sys.stderr)
        return refused.exit_code
    _print(outcome, flags=False)
    if outcome.applied:
        print(f"\napplied {outcome.applied} change(s); the log: {LOG_QUERY}")
        # The changes are made: a refresh that fails is reported, not failed (as a push's).
        print(f"warehouse: {refresh(resources['lake'])}")
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


class ActivitiesConfig(dg.Config):
    apply: bool = False
    allow_activate: bool = False
    allow_delete: bool = False
    #: Who applies, for the log; default: the run's user tag, else the run.
    by: str = ""


@dg.op(
    description=(
        "Plans the comment automation activities of ACTIVITIES_DIR against the service; "
        "with `apply: true`, makes the service match and records each change in "
        "`sync.activity_changes`."
    )
)
@tells_errors
def activities_plan_or_apply(
    context: dg.OpExecutionContext,
    config: ActivitiesConfig,
    comment: CommentAutomationResource,
    lake: LakeResource,
) -> dict[str, int]:
    folder = activities_dir()
    if not config.apply:
        outcome = plan_activities(comment, lake.lake(), folder)
    else:
        by = config.by or context.run.tags.get("dagster/user") or f"dagster run {context.run_id}"
        outcome = apply_activities(
            comment,
            lake.lake(),
            folder,
            by=by,
            allow_activate=config.allow_activate,
            allow_delete=config.allow_delete,
        )
    for plan in outcome.plans:
        lines = plan.lines(flags=not config.apply)  # after an apply, no flag is needed
        context.log.info(f"connection {plan.connection}: " + "; ".join(lines))
    if outcome.applied:  # as the command line's
        context.log.info(f"warehouse: {refresh(lake)}")
    counts = outcome.counts() | {"applied": outcome.applied}
    context.add_output_metadata({name: count for name, count in counts.items()})
    return counts


@dg.job(
    description=(
        "Comment automation activities as code (docs/activities.md): plans the files of "
        "ACTIVITIES_DIR against the service (what would be created, updated, paused, "
        "activated or deleted, and drift), writing nothing; with `apply: true` makes it so. "
        "Activating and deleting need `allow_activate` and `allow_delete`."
    )
)
def activities() -> None:
    activities_plan_or_apply()


JOBS = [activities]
