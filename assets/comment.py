"""Comment automation streams, one asset each, and their checks.

Connections are workspaces (one key each); every row carries its `connection`. What each
stream's rows are and how they are fetched, and what each check compares, live in the core
(`pipelines/streams/comment/`); this module runs them as Dagster assets and checks.
"""

from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import date

import dagster as dg

from assets.checks import unique_ids_check
from assets.landing import land_days, land_snapshot, partition_days
from assets.partitions import daily, single_run
from assets.resources import CommentAutomationResource, LakeResource
from pipelines.clients.base import Connection
from pipelines.lake import Stream
from pipelines.landing import today
from pipelines.streams.comment import (
    ACCOUNTS,
    ACTIVITIES,
    ACTIVITY_DAILY,
    DAILY_STATS,
    POSTS,
    SERVICE,
    STREAMS,
    TRIGGER_LOGS,
    WORKSPACE,
)
from pipelines.streams.comment.checks import (
    LogTotals,
    expiring_tokens,
    log_total,
    logs_against_stats,
)
from pipelines.streams.comment.daily_stats import stats_days
from pipelines.streams.comment.served import OutsideServedWindow
from pipelines.streams.comment.snapshots import (
    RecentPosts,
    account_rows,
    activity_daily_rows,
    activity_rows,
    workspace_rows,
)
from pipelines.streams.comment.trigger_logs import trigger_log_days
from pipelines.transport import CallStats, Transport

POOL = "comment_api"
KINDS = {"python", "parquet"}
#: Mismatched days a reconciliation reports at most: enough to see the pattern.
MISMATCHES_SHOWN = 20


def _key(name: str) -> dg.AssetKey:
    return dg.AssetKey([SERVICE, name])


# -- snapshot streams ------------------------------------------------------------------------


@dg.asset(
    key=_key("workspace"),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    description="The workspace of each key (`GET /me`): plan, trial end, service status.",
)
def workspace(
    context: dg.AssetExecutionContext, comment: CommentAutomationResource, lake: LakeResource
):
    return land_snapshot(context, comment, lake.lake(), WORKSPACE, workspace_rows)


@dg.asset(
    key=_key("accounts"),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    description="Connected Instagram, Facebook and Threads accounts and their token expiry.",
)
def accounts(
    context: dg.AssetExecutionContext, comment: CommentAutomationResource, lake: LakeResource
):
    return land_snapshot(context, comment, lake.lake(), ACCOUNTS, account_rows)


@dg.asset(
    key=_key("posts"),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    deps=[_key("accounts")],
    description=(
        "Recent posts and stories per account, read live from the platform. An account whose "
        "platform keeps failing (502 after retries) is reported in `failed_accounts`; the "
        "others still land."
    ),
)
def posts(
    context: dg.AssetExecutionContext, comment: CommentAutomationResource, lake: LakeResource
):
    recent = RecentPosts(warn=context.log.warning)
    return land_snapshot(
        context,
        comment,
        lake.lake(),
        POSTS,
        recent.rows,
        extra_metadata=lambda: {"failed_accounts": recent.failed},
    )


@dg.asset(
    key=_key("activities"),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    description="Every activity (comment automation) with its stats totals.",
)
def activities(
    context: dg.AssetExecutionContext, comment: CommentAutomationResource, lake: LakeResource
):
    return land_snapshot(context, comment, lake.lake(), ACTIVITIES, activity_rows)


@dg.asset(
    key=_key("activity_daily"),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    deps=[_key("activities")],
    description="The 14-day trend of successful triggers per activity (`GET /activities/{id}`).",
)
def activity_daily(
    context: dg.AssetExecutionContext, comment: CommentAutomationResource, lake: LakeResource
):
    return land_snapshot(context, comment, lake.lake(), ACTIVITY_DAILY, activity_daily_rows)


# -- daily streams ----------------------------------------------------------------------------


def _land_served_days(
    context: dg.AssetExecutionContext,
    comment: CommentAutomationResource,
    lake: LakeResource,
    stream: Stream,
    rows_by_day: Callable[[Transport, Connection, list[date]], Iterable],
) -> dg.MaterializeResult:
    """`land_days` over the run's partitions; a day the service no longer serves fails the
    run as a `dg.Failure`, whose message is all there is to say (no traceback)."""
    try:
        return land_days(
            context, comment, lake.lake(), stream, partition_days(context), rows_by_day
        )
    except OutsideServedWindow as refusal:
        raise dg.Failure(str(refusal)) from None


@dg.asset(
    key=_key("trigger_logs"),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    partitions_def=daily,
    backfill_policy=single_run,
    description=(
        "Every trigger log (one row per public reply or DM attempt), by UTC day of "
        "`created_at`. A range is paged once, newest first, deduplicated by id and repaired "
        "when the list shifts; the service keeps 365 days."
    ),
)
def trigger_logs(
    context: dg.AssetExecutionContext, comment: CommentAutomationResource, lake: LakeResource
):
    def rows_by_day(transport: Transport, connection: Connection, days: list[date]):
        return trigger_log_days(
            transport, connection, days, lake=lake.lake(), today=today(), log=context.log.info
        )

    return _land_served_days(context, comment, lake, TRIGGER_LOGS, rows_by_day)


@dg.asset(
    key=_key("daily_stats"),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    partitions_def=daily,
    backfill_policy=single_run,
    description="Public replies, DMs and failures per UTC day (`GET /stats`; 90 days served).",
)
def daily_stats(
    context: dg.AssetExecutionContext, comment: CommentAutomationResource, lake: LakeResource
):
    def rows_by_day(transport: Transport, connection: Connection, days: list[date]):
        return stats_days(transport, connection, days, today())

    return _land_served_days(context, comment, lake, DAILY_STATS, rows_by_day)


# -- checks ------------------------------------------------------------------------------------


@dg.asset_check(asset=_key("trigger_logs"), name="logs_match_daily_stats", blocking=False)
def logs_match_daily_stats(lake: LakeResource) -> dg.AssetCheckResult:
    """Each landed day's trigger logs equal that day's stats (public replies + DMs + failed):
    the two are separate endpoints of the service, so this reconciles them."""
    verdict = logs_against_stats(lake.lake())
    if verdict is None:
        return dg.AssetCheckResult(passed=True, metadata={"days_compared": 0})
    return dg.AssetCheckResult(
        passed=verdict.passed,
        metadata={
            "days_compared": verdict.days_compared,
            "days_mismatched": verdict.days_mismatched[:MISMATCHES_SHOWN],
        },
    )


@dg.asset_check(asset=_key("trigger_logs"), name="rows_equal_service_total", blocking=False)
def rows_equal_service_total(
    comment: CommentAutomationResource, lake: LakeResource
) -> dg.AssetCheckResult:
    """The landed rows of the served window equal the service's `total` (one request per
    connection). Only meaningful once every served day is landed; until then it warns."""
    store, day = lake.lake(), today()
    stats = CallStats()
    per_connection = {}
    for connection in comment.connections:
        with comment.transport(connection, stats) as transport:
            per_connection[connection.name] = log_total(transport, store, connection, day)
    verdict = LogTotals(per_connection)
    return dg.AssetCheckResult(
        passed=verdict.equal,
        severity=(
            dg.AssetCheckSeverity.ERROR if verdict.all_days_landed else dg.AssetCheckSeverity.WARN
        ),
        metadata={
            "connections": {name: asdict(total) for name, total in per_connection.items()},
            "all_days_landed": verdict.all_days_landed,
            **stats.as_metadata(),
        },
    )


@dg.asset_check(asset=_key("accounts"), name="tokens_not_expiring", blocking=False)
def tokens_not_expiring(lake: LakeResource) -> dg.AssetCheckResult:
    """Warn when an account's token expires within 7 days: its automations stop then, and
    reconnecting takes a person at a browser (the service offers no API for it)."""
    expiring = expiring_tokens(lake.lake())
    return dg.AssetCheckResult(
        passed=not expiring,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"expiring_accounts": [asdict(token) for token in expiring]},
    )


ASSETS = [workspace, accounts, posts, activities, activity_daily, trigger_logs, daily_stats]
CHECKS = [
    *(unique_ids_check(stream, _key(stream.name)) for stream in STREAMS),
    logs_match_daily_stats,
    rows_equal_service_total,
    tokens_not_expiring,
]
