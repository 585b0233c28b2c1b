"""What the comment service's own checks compare, and their verdicts with the figures behind
them. The asset checks (`assets/comment.py`) turn each into a result; the lake is read with
an in-memory DuckDB (`Lake.query`), never the warehouse file, so a check never waits on its
lock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import pyarrow.parquet as pq

from pipelines.clients.base import Connection
from pipelines.clients.comment import LOGS_MAX_DAYS, CommentClient
from pipelines.lake import Lake
from pipelines.streams.comment import ACCOUNTS, DAILY_STATS, TRIGGER_LOGS
from pipelines.transport import Transport

#: An account whose token expires within this many days is flagged (a warning check).
TOKEN_WARNING_DAYS = 7


@dataclass(frozen=True)
class LogsAgainstStats:
    """Landed days of trigger logs against the same days' stats."""

    days_compared: int
    #: Each day whose counts differ: connection, date, logs counted, stats' sum.
    days_mismatched: list[dict]

    @property
    def passed(self) -> bool:
        return not self.days_mismatched


def logs_against_stats(lake: Lake) -> LogsAgainstStats | None:
    """Each landed day's trigger logs against that day's stats (public replies + DMs +
    failed): two separate endpoints of the service, so this reconciles them. None while
    either stream has nothing landed: there is nothing to compare."""
    logs, stats = lake.relation(TRIGGER_LOGS), lake.relation(DAILY_STATS)
    if logs is None or stats is None:
        return None
    # Days landed with no logs have no rows, so the landed days come from the files.
    landed = {
        (path.stem, path.parent.name.removeprefix("date=")) for path in lake.files(TRIGGER_LOGS)
    }
    counted = {
        (c, str(d)): n
        for c, d, n in lake.query(
            f"SELECT connection, date, count(*) FROM {logs} GROUP BY ALL", spill=True
        )
    }
    expected = {
        (c, str(d)): n
        for c, d, n in lake.query(
            f"SELECT connection, date, public_replies + dms + failed FROM {stats}"
        )
    }
    compared = sorted(landed & expected.keys())
    mismatched = [
        {"connection": c, "date": d, "logs": counted.get((c, d), 0), "stats": expected[(c, d)]}
        for c, d in compared
        if counted.get((c, d), 0) != expected[(c, d)]
    ]
    return LogsAgainstStats(days_compared=len(compared), days_mismatched=mismatched)


@dataclass(frozen=True)
class LogTotal:
    """One connection's landed trigger logs of the served window against the service's
    `total` for it."""

    service_total: int
    landed: int
    days_landed: int


def log_total(transport: Transport, lake: Lake, connection: Connection, today: date) -> LogTotal:
    """One request (a page of one log, for its `total`) and the landed files' row counts."""
    total = CommentClient(transport).logs(days=LOGS_MAX_DAYS, page=0, limit=1)["total"]
    oldest = today - timedelta(days=LOGS_MAX_DAYS - 1)
    landed_days = [d for d in lake.days(TRIGGER_LOGS, connection.name) if d >= oldest]
    rows = sum(
        pq.ParquetFile(lake.path(TRIGGER_LOGS, connection.name, d)).metadata.num_rows
        for d in landed_days
    )
    return LogTotal(service_total=total, landed=rows, days_landed=len(landed_days))


@dataclass(frozen=True)
class LogTotals:
    """Every connection's `LogTotal`: equal is the verdict, but it is only meaningful once
    every served day is landed; until then a difference is expected."""

    connections: dict[str, LogTotal]

    @property
    def equal(self) -> bool:
        return all(c.service_total == c.landed for c in self.connections.values())

    @property
    def all_days_landed(self) -> bool:
        return all(c.days_landed == LOGS_MAX_DAYS for c in self.connections.values())


@dataclass(frozen=True)
class ExpiringToken:
    connection: str
    account_id: str
    handle: str
    #: As DuckDB writes a timestamp with time zone.
    token_expires_at: str


def expiring_tokens(lake: Lake) -> list[ExpiringToken]:
    """The landed accounts whose token expires within `TOKEN_WARNING_DAYS`, soonest first:
    their automations stop then, and reconnecting takes a person at a browser."""
    relation = lake.relation(ACCOUNTS)
    if relation is None:
        return []
    expiring = lake.query(
        f"""
        SELECT connection, id, handle, token_expires_at::VARCHAR
        FROM {relation}
        WHERE token_expires_at < now() + INTERVAL {TOKEN_WARNING_DAYS} DAY
        ORDER BY token_expires_at
        """
    )
    return [ExpiringToken(*row) for row in expiring]
