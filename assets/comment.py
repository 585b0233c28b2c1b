"""Comment automation streams, one asset each, and their checks.

Connections are workspaces (one key each); every row carries its `connection`. What each
stream's rows are and how they are fetched, and what each check compares, live in the core
(`pipelines/streams/comment/`); this module runs them as Dagster assets and checks.
"""

from dataclasses import asdict
from functools import partial

import dagster as dg

from assets.checks import unique_ids_check
from assets.factory import StreamAsset, stream_asset
from assets.resources import CommentAutomationResource, LakeResource
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
from pipelines.streams.comment.snapshots import (
    account_rows,
    activity_daily_rows,
    activity_rows,
    land_posts,
    workspace_rows,
)
from pipelines.streams.comment.trigger_logs import trigger_log_days
from pipelines.transport import CallStats

#: Mismatched days a reconciliation reports at most: enough to see the pattern.
MISMATCHES_SHOWN = 20


def _key(name: str) -> dg.AssetKey:
    return dg.AssetKey([SERVICE, name])


PULLED = [
    StreamAsset(
        WORKSPACE,
        lambda pull: pull.snapshot(workspace_rows),
        "The workspace of each key (`GET /me`): plan, trial end, service status.",
    ),
    StreamAsset(
        ACCOUNTS,
        lambda pull: pull.snapshot(account_rows),
        "Connected Instagram, Facebook and Threads accounts and their token expiry.",
    ),
    StreamAsset(
        POSTS,
        land_posts,
        "Recent posts and stories per account, read live from the platform. An account whose "
        "platform keeps failing (502 after retries) is reported in `failed_accounts`; the "
        "others still land.",
        deps=(ACCOUNTS,),
    ),
    StreamAsset(
        ACTIVITIES,
        lambda pull: pull.snapshot(activity_rows),
        "Every activity (comment automation) with its stats totals.",
    ),
    StreamAsset(
        ACTIVITY_DAILY,
        lambda pull: pull.snapshot(activity_daily_rows),
        "The 14-day trend of successful triggers per activity (`GET /activities/{id}`).",
        deps=(ACTIVITIES,),
    ),
    StreamAsset(
        TRIGGER_LOGS,
        lambda pull: pull.daily(
            partial(trigger_log_days, lake=pull.lake, today=today(), log=pull.log)
        ),
        "Every trigger log (one row per public reply or DM attempt), by UTC day of "
        "`created_at`. A range is paged once, newest first, deduplicated by id and repaired "
        "when the list shifts; the service keeps 365 days.",
    ),
    StreamAsset(
        DAILY_STATS,
        lambda pull: pull.daily(partial(stats_days, today=today())),
        "Public replies, DMs and failures per UTC day (`GET /stats`; 90 days served).",
    ),
]
ASSETS = [stream_asset(declared) for declared in PULLED]
workspace, accounts, posts, activities, activity_daily, trigger_logs, daily_stats = ASSETS


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


CHECKS = [
    *(unique_ids_check(stream, _key(stream.name)) for stream in STREAMS),
    logs_match_daily_stats,
    rows_equal_service_total,
    tokens_not_expiring,
]
