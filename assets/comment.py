"""Comment automation streams (spec: comment-automation-api.md), one asset each.

Connections are workspaces (one key each); every row carries its `connection`.
"""

import json
import math
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime, timedelta
from itertools import groupby, repeat
from operator import itemgetter

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from assets.checks import unique_ids_check
from assets.landing import (
    land_days,
    land_snapshot,
    partition_days,
)
from assets.partitions import daily, single_run
from assets.resources import CommentAutomationResource, LakeResource
from pipelines.clients.base import Connection
from pipelines.clients.comment import (
    LOG_SCHEMA,
    LOGS_MAX_DAYS,
    LOGS_PAGE_LIMIT,
    STATS_MAX_DAYS,
    CommentClient,
    LogTable,
)
from pipelines.lake import Lake
from pipelines.landing import parse_moment, today
from pipelines.paging import Page, first_page_holding, offset_pages
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
from pipelines.transport import CallStats, ServiceError, Transport

POOL = "comment_api"
KINDS = {"python", "parquet"}
#: An account whose token expires within this many days is flagged (a warning check).
TOKEN_WARNING_DAYS = 7


def _key(name: str) -> dg.AssetKey:
    return dg.AssetKey([SERVICE, name])


# -- workspace, accounts, posts --------------------------------------------------------------


def _workspace_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    me = CommentClient(transport).me()
    workspace = me.workspace
    yield {
        "id": workspace.id,
        "name": workspace.name,
        "plan": workspace.plan,
        "trial_ends_at": parse_moment(workspace.trial_ends_at),
        "service_status": workspace.service_status,
        "billing_url": workspace.billing_url,
        "user": json.dumps(me.user) if me.user is not None else None,
        "usage": json.dumps(me.usage) if me.usage is not None else None,
        "api_key_scope": (me.api_key or {}).get("scope"),
    }


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
    return land_snapshot(context, comment, lake.lake(), WORKSPACE, _workspace_rows)


def _account_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    for account in CommentClient(transport).accounts().accounts:
        yield {
            **account.model_dump(include=set(ACCOUNTS.schema.names)),
            "token_expires_at": parse_moment(account.token_expires_at),
            "connected_at": parse_moment(account.connected_at),
        }


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
    return land_snapshot(context, comment, lake.lake(), ACCOUNTS, _account_rows)


POST_KINDS = ("posts", "story")


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
    failed: list[str] = []

    def rows(transport: Transport, connection: Connection) -> Iterator[dict]:
        client = CommentClient(transport)
        for account in client.accounts().accounts:
            for kind in POST_KINDS:
                try:
                    listed = client.posts(account.id, kind).posts
                except ServiceError as error:
                    if error.status != 502:
                        raise
                    failed.append(f"{connection.name}/{account.id}/{kind}")
                    context.log.warning(f"posts of account {account.id} ({kind}): {error}")
                    continue
                for post in listed:
                    yield {
                        **post.model_dump(include=set(POSTS.schema.names)),
                        "account_id": account.id,
                        "kind": kind,
                        "timestamp": parse_moment(post.timestamp),
                    }

    return land_snapshot(
        context,
        comment,
        lake.lake(),
        POSTS,
        rows,
        extra_metadata=lambda: {"failed_accounts": failed},
    )


# -- activities -------------------------------------------------------------------------------


def _activity_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    for activity in CommentClient(transport).activities().activities:
        row = activity.model_dump(include=set(ACTIVITIES.schema.names))
        row.update(
            dm=json.dumps(activity.dm),
            follow_gate=json.dumps(activity.follow_gate) if activity.follow_gate else None,
            start_at=parse_moment(activity.start_at),
            end_at=parse_moment(activity.end_at),
            created_at=parse_moment(activity.created_at),
            updated_at=parse_moment(activity.updated_at),
            public_replies_sent=activity.stats.public_replies_sent if activity.stats else None,
            dms_sent=activity.stats.dms_sent if activity.stats else None,
        )
        yield row


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
    return land_snapshot(context, comment, lake.lake(), ACTIVITIES, _activity_rows)


def _activity_daily_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    client = CommentClient(transport)
    for activity in client.activities().activities:
        for day in client.activity(activity.id).daily:
            yield {
                "activity_id": activity.id,
                "date": date.fromisoformat(day.date),
                "successful_triggers": day.successful_triggers,
            }


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
    return land_snapshot(context, comment, lake.lake(), ACTIVITY_DAILY, _activity_daily_rows)


# -- trigger logs -----------------------------------------------------------------------------


def _served_since(days: list[date], served_days: int, what: str) -> int:
    """The `days` parameter reaching back to the first day, or a clear refusal."""
    oldest = today() - timedelta(days=served_days - 1)
    if days[0] < oldest:
        raise dg.Failure(
            f"{what} for {days[0]} cannot be pulled: the service serves the last {served_days} "
            f"days only (spec section 8), so the oldest day it serves is {oldest}."
        )
    return (today() - days[0]).days + 1


#: UTC days as whole numbers: seconds since the epoch // SECONDS_A_DAY.
SECONDS_A_DAY = 86_400
EPOCH = date(1970, 1, 1)


def _landed_fingerprint(lake: LakeResource, connection: str, days: list[date]) -> tuple | None:
    """(rows, newest id) of the landed days, or None if one of them was never landed. The
    files keep the service's newest-first order, so the newest id is a file's first row."""
    store = lake.lake()
    rows, newest = 0, None
    for day in sorted(days, reverse=True):
        path = store.path(TRIGGER_LOGS, connection, day)
        if not path.exists():
            return None
        landed = pq.ParquetFile(path)
        rows += landed.metadata.num_rows
        if newest is None and landed.metadata.num_rows:
            newest = landed.read_row_group(0, columns=["id"]).column("id")[0].as_py()
    return rows, newest


def _new_at_head(
    client: CommentClient, window_days: int, first: LogTable, landed: tuple[int, str | None]
) -> pa.Table | None:
    """The logs listed before the newest landed one, when they are all that changed: the
    service's total grew by exactly their number, and it stayed put while they were read.
    None otherwise (a log vanished, or the list moved): the caller pages the range whole."""
    landed_rows, landed_newest = landed
    new = first.total - landed_rows
    if landed_newest is None or new <= 0:
        return None
    pages = [first.logs]
    # The newest landed log sits at position `new`: read the pages up to it, no further.
    for page in range(1, new // LOGS_PAGE_LIMIT + 1):
        answer = client.log_table(days=window_days, page=page)
        if answer.total != first.total:
            return None
        pages.append(answer.logs)
    listed = pa.concat_tables(pages)
    if listed.num_rows <= new or listed["id"][new].as_py() != landed_newest:
        return None
    head = listed.slice(0, new)
    return head if pc.count_distinct(head["id"]).as_py() == new else None


def _merged_days(
    store: Lake, connection: str, days: list[date], head: pa.Table, head_days: pa.Array
) -> Iterator[tuple[date, Iterable[pa.Table] | None]]:
    """Each day of `days` that got new logs (`head_days`: the UTC day of each): its new logs,
    newest first, before its landed ones (the files keep the service's order); the other
    days unchanged."""
    for day in days:
        new = head.filter(pc.equal(head_days, pa.scalar(day, pa.date32())))
        if not new.num_rows:
            yield day, None
            continue
        landed = pq.read_table(store.path(TRIGGER_LOGS, connection, day), columns=LOG_SCHEMA.names)
        yield day, [new, landed]


def _piece(rows: list[tuple]) -> pa.Table:
    """`(id, epoch, page table, index)` rows of one page as a table: a slice when they are
    a whole run of it (as they mostly are), else a `take`."""
    table, first = rows[0][2], rows[0][3]
    if rows[-1][3] - first + 1 == len(rows):
        return table.slice(first, len(rows))
    return table.take([row[3] for row in rows])


def _trigger_log_days(
    transport: Transport, connection: Connection, days: list[date], lake: LakeResource, log
) -> Iterator[tuple[date, Iterable[pa.Table] | None]]:
    """Page the newest-first log list once for the whole range, yielding each day whole."""
    client = CommentClient(transport)
    window_days = _served_since(days, LOGS_MAX_DAYS, "Trigger logs")
    start = datetime.combine(days[0], datetime.min.time(), UTC)
    end = datetime.combine(days[-1] + timedelta(days=1), datetime.min.time(), UTC)
    first = client.log_table(days=window_days, page=0)
    if days[-1] == today():
        landed = _landed_fingerprint(lake, connection.name, days)
        newest = first.logs["id"][0].as_py() if first.logs.num_rows else None
        if landed == (first.total, newest):
            log.info(f"trigger logs [{connection.name}]: nothing new since the last pull")
            for day in days:
                yield day, None
            return
        head = _new_at_head(client, window_days, first, landed) if landed else None
        head_days = None if head is None else pc.cast(head["created_at"], pa.date32())
        if head_days is not None and set(head_days.to_pylist()) <= set(days):
            log.info(f"trigger logs [{connection.name}]: {head.num_rows} new since the last pull")
            yield from _merged_days(lake.lake(), connection.name, days, head, head_days)
            return
    pages = math.ceil(first.total / LOGS_PAGE_LIMIT)
    start_page = 0
    if end < datetime.now(UTC) and pages > 1:
        # A backfill of older days skips the newer pages by binary search.
        def first_moment(page: int) -> datetime | None:
            listed = client.log_table(days=window_days, page=page * LOGS_PAGE_LIMIT, limit=1)
            return listed.logs["created_at"][0].as_py() if listed.logs.num_rows else None

        start_page = first_page_holding(
            first_moment, pages=pages, is_after_window=lambda moment: moment >= end
        )

    unused_first = [first]

    def fetch(page: int) -> Page[tuple]:
        # The first page is already here; a later look at page 0 (after a shift) asks again.
        answer = unused_first.pop() if page == 0 and unused_first else None
        answer = answer or client.log_table(days=window_days, page=page)
        # Paging needs each row's id and moment; the row itself stays in its page's table.
        table = answer.logs
        ids = table["id"].to_pylist()
        moments = pc.cast(table["created_at"], pa.int64()).to_pylist()
        return Page(list(zip(ids, moments, repeat(table), range(table.num_rows))), answer.total)

    start_at, end_at = int(start.timestamp()), int(end.timestamp())

    def day_pieces() -> Iterator[tuple[int, pa.Table]]:
        """(UTC day number, rows of a page on that day) in the window, newest first."""
        last_day: int | None = None
        for batch in offset_pages(
            fetch,
            limit=LOGS_PAGE_LIMIT,
            row_id=itemgetter(0),
            start_page=start_page,
            stop=lambda row: row[1] < start_at,
        ):
            run_day, run = None, []
            for row in batch:
                if row[1] >= end_at:
                    continue
                day = row[1] // SECONDS_A_DAY
                if last_day is not None and day > last_day:
                    # Arrived at the head after its day was landed (seen again after a step
                    # back): the next run re-pulls that day; landing it would replace the day.
                    continue
                last_day = day
                if day != run_day:
                    if run:
                        yield run_day, _piece(run)
                    run_day, run = day, []
                run.append(row)
            if run:
                yield run_day, _piece(run)

    # Each day streams into its file as its pages arrive: memory holds a row group, never
    # a day or the history.
    for day, pieces in groupby(day_pieces(), key=itemgetter(0)):
        yield EPOCH + timedelta(days=day), (piece for _, piece in pieces)


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
        return _trigger_log_days(transport, connection, days, lake, context.log)

    return land_days(
        context, comment, lake.lake(), TRIGGER_LOGS, partition_days(context), rows_by_day
    )


# -- daily stats ------------------------------------------------------------------------------


def _stats_days(
    transport: Transport, connection: Connection, days: list[date]
) -> Iterator[tuple[date, list[dict]]]:
    window = _served_since(days, STATS_MAX_DAYS, "Daily stats")
    for entry in CommentClient(transport).stats(window).daily:
        day = date.fromisoformat(entry.date)
        yield (
            day,
            [{"public_replies": entry.public_replies, "dms": entry.dms, "failed": entry.failed}],
        )


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
    days = partition_days(context)
    return land_days(context, comment, lake.lake(), DAILY_STATS, days, _stats_days)


# -- checks ------------------------------------------------------------------------------------


@dg.asset_check(asset=_key("trigger_logs"), name="logs_match_daily_stats", blocking=False)
def logs_match_daily_stats(lake: LakeResource) -> dg.AssetCheckResult:
    """Each landed day's trigger logs equal that day's stats (public replies + DMs + failed):
    the two are separate endpoints of the service, so this reconciles them."""
    store = lake.lake()
    logs, stats = store.relation(TRIGGER_LOGS), store.relation(DAILY_STATS)
    if logs is None or stats is None:
        return dg.AssetCheckResult(passed=True, metadata={"days_compared": 0})
    # Days landed with no logs have no rows, so the landed days come from the files.
    landed = {
        (path.stem, path.parent.name.removeprefix("date=")) for path in store.files(TRIGGER_LOGS)
    }
    counted = {
        (c, str(d)): n
        for c, d, n in store.query(
            f"SELECT connection, date, count(*) FROM {logs} GROUP BY ALL", spill=True
        )
    }
    expected = {
        (c, str(d)): n
        for c, d, n in store.query(
            f"SELECT connection, date, public_replies + dms + failed FROM {stats}"
        )
    }
    compared = sorted(landed & expected.keys())
    mismatched = [
        {"connection": c, "date": d, "logs": counted.get((c, d), 0), "stats": expected[(c, d)]}
        for c, d in compared
        if counted.get((c, d), 0) != expected[(c, d)]
    ]
    return dg.AssetCheckResult(
        passed=not mismatched,
        metadata={"days_compared": len(compared), "days_mismatched": mismatched[:20]},
    )


@dg.asset_check(asset=_key("trigger_logs"), name="rows_equal_service_total", blocking=False)
def rows_equal_service_total(
    comment: CommentAutomationResource, lake: LakeResource
) -> dg.AssetCheckResult:
    """The landed rows of the served window equal the service's `total` (one request per
    connection). Only meaningful once every served day is landed; until then it warns."""
    store = lake.lake()
    oldest = today() - timedelta(days=LOGS_MAX_DAYS - 1)
    stats = CallStats()
    per_connection: dict[str, dict] = {}
    for connection in comment.connections:
        with comment.transport(connection, stats) as transport:
            total = CommentClient(transport).logs(days=LOGS_MAX_DAYS, page=0, limit=1)["total"]
        landed_days = [d for d in store.days(TRIGGER_LOGS, connection.name) if d >= oldest]
        rows = sum(
            pq.ParquetFile(store.path(TRIGGER_LOGS, connection.name, d)).metadata.num_rows
            for d in landed_days
        )
        per_connection[connection.name] = {
            "service_total": total,
            "landed": rows,
            "days_landed": len(landed_days),
        }
    complete = all(c["days_landed"] == LOGS_MAX_DAYS for c in per_connection.values())
    equal = all(c["service_total"] == c["landed"] for c in per_connection.values())
    return dg.AssetCheckResult(
        passed=equal,
        severity=dg.AssetCheckSeverity.ERROR if complete else dg.AssetCheckSeverity.WARN,
        metadata={
            "connections": per_connection,
            "all_days_landed": complete,
            **stats.as_metadata(),
        },
    )


@dg.asset_check(asset=_key("accounts"), name="tokens_not_expiring", blocking=False)
def tokens_not_expiring(lake: LakeResource) -> dg.AssetCheckResult:
    """Warn when an account's token expires within 7 days: its automations stop then, and
    reconnecting takes a person at a browser (spec section 1)."""
    store = lake.lake()
    relation = store.relation(ACCOUNTS)
    expiring = []
    if relation is not None:
        expiring = store.query(
            f"""
            SELECT connection, id, handle, token_expires_at::VARCHAR
            FROM {relation}
            WHERE token_expires_at < now() + INTERVAL {TOKEN_WARNING_DAYS} DAY
            ORDER BY token_expires_at
            """
        )
    return dg.AssetCheckResult(
        passed=not expiring,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "expiring_accounts": [
                {"connection": c, "account_id": i, "handle": h, "token_expires_at": t}
                for c, i, h, t in expiring
            ]
        },
    )


ASSETS = [workspace, accounts, posts, activities, activity_daily, trigger_logs, daily_stats]
CHECKS = [
    *(unique_ids_check(stream, _key(stream.name)) for stream in STREAMS),
    logs_match_daily_stats,
    rows_equal_service_total,
    tokens_not_expiring,
]
