"""Comment automation streams, one asset each, and their checks.

Connections are workspaces (one key each); every row carries its `connection`. What each
stream's rows are and how they are fetched, and what each check compares, live in the core
(`pipelines/streams/comment/`); this module runs them as Dagster assets and checks.
"""

from dataclasses import asdict

import dagster as dg

from assets.checks import (
    checked_days,
    nothing_compared,
    result_of,
    scope,
    stream_check,
    stream_checks,
)
from assets.factory import stream_assets
from assets.resources import CommentAutomationResource, LakeResource
from pipelines.clients.failures import isolated
from pipelines.pull.landing import today
from pipelines.streams.comment import ACCOUNTS, STREAMS, TRIGGER_LOGS
from pipelines.streams.comment.checks import (
    TOKEN_WARNING_DAYS,
    LogTotals,
    expiring_tokens,
    log_total,
    logs_against_stats,
)
from pipelines.transport import CallStats

#: Mismatched days a reconciliation reports at most: enough to see the pattern.
MISMATCHES_SHOWN = 20


ASSETS = stream_assets(STREAMS)


# -- checks ------------------------------------------------------------------------------------


@stream_check(
    TRIGGER_LOGS,
    "logs_match_daily_stats",
    "Each closed day's trigger logs equal that day's stats (public replies + DMs + failed), "
    "for the days before today (UTC) whose files on both sides were pulled after the day "
    "ended. Warns when no such day is landed.",
)
def logs_match_daily_stats(
    context: dg.AssetCheckExecutionContext, lake: LakeResource
) -> dg.AssetCheckResult:
    """The two are separate endpoints of the service, so this reconciles them; today and
    days pulled while still open keep changing, so they are left out
    (`logs_against_stats`). The days the run landed; every day in the whole-stream job."""
    days = checked_days(context, TRIGGER_LOGS)
    verdict = logs_against_stats(lake.lake(), today(), days)
    figures = {
        **scope(days),
        "days_compared": verdict.days_compared,
        "days_pulled_before_they_ended": verdict.days_pulled_before_they_ended,
    }
    if verdict.nothing_compared is None:
        figures["days_mismatched"] = verdict.days_mismatched[:MISMATCHES_SHOWN]
    return result_of(
        verdict, figures, description=f"{verdict.days_compared} closed day(s) compared"
    )


@stream_check(
    TRIGGER_LOGS,
    "rows_equal_service_total",
    "The landed trigger logs of the closed days (before today, UTC) from each connection's "
    "first landed one to yesterday, within the 365 days the service keeps, equal the "
    "service's count of the same days, read from one answer of `GET /logs`. An error only "
    "once every one of those days is landed from a pull after it ended; a warning before.",
)
def rows_equal_service_total(
    comment: CommentAutomationResource, lake: LakeResource
) -> dg.AssetCheckResult:
    """Finds logs deleted on older days, which no per-day pull looks at again; today is
    left out on both sides, as logs keep arriving between the landing and the check
    (`closed_log_total`)."""
    store, day = lake.lake(), today()
    stats = CallStats()
    per_connection, failed = {}, {}
    for connection in comment.connections:
        # A connection that cannot be asked (its key, its address) is left out and named;
        # the others are still compared.
        with isolated(comment, connection, failed), comment.transport(connection, stats) as t:
            per_connection[connection.name] = log_total(t, store, connection, day)
    verdict = LogTotals(per_connection)
    metadata = {
        "connections": {name: asdict(total) for name, total in per_connection.items()},
        "conclusive": verdict.conclusive,
        **stats.as_metadata(),
        **({"not_compared": failed} if failed else {}),
    }
    if not per_connection:
        reason = "; ".join(failed.values()) or "no comment connection configured"
        return nothing_compared(reason, metadata)
    if not any(total.days_landed for total in per_connection.values()):
        return nothing_compared("no closed day of trigger logs landed", metadata)
    if failed and verdict.equal:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"equal where compared; not compared for {sorted(failed)}: "
            + "; ".join(failed.values()),
            metadata=metadata,
        )
    return dg.AssetCheckResult(
        passed=verdict.equal,
        severity=(
            dg.AssetCheckSeverity.ERROR if verdict.conclusive else dg.AssetCheckSeverity.WARN
        ),
        description=(
            "every closed day from each connection's first landed one to yesterday"
            if verdict.conclusive
            else "not conclusive: a closed day among them is not landed, was pulled before it "
            "ended, or the service's list moved too fast to count"
        ),
        metadata=metadata,
    )


@stream_check(
    ACCOUNTS,
    "tokens_not_expiring",
    f"Warns when a landed account's token expires within {TOKEN_WARNING_DAYS} days: its "
    "automations stop then, and reconnecting takes a person at a browser (the service "
    "offers no API for it).",
)
def tokens_not_expiring(lake: LakeResource) -> dg.AssetCheckResult:
    expiring = expiring_tokens(lake.lake())
    if expiring is None:
        return nothing_compared("accounts not landed")
    return dg.AssetCheckResult(
        passed=not expiring,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"expiring_accounts": [asdict(token) for token in expiring]},
    )


CHECKS = [
    *stream_checks(STREAMS),
    logs_match_daily_stats,
    rows_equal_service_total,
    tokens_not_expiring,
]
