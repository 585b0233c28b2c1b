"""Comment automation activities as code (pipelines/activities/, docs/activities.md): the
`activities` job of the Dagster UI, which plans by default and applies with `apply: true`
(the command line's `activities plan|apply` is `cli/activities.py`)."""

import dagster as dg

from assets.failures import tells_errors
from assets.resources import CommentAutomationResource, LakeResource
from pipelines.activities import (
    activities_dir,
    apply_activities,
    plan_activities,
)
from pipelines.push.run import refresh


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
            log=context.log.info,
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
