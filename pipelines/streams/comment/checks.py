"""What the comment service's own checks compare, and their verdicts with the figures behind
them. The asset checks (`assets/comment.py`) turn each into a result; the lake is read with
an in-memory DuckDB (`Lake.query`), never the warehouse file, so a check never waits on its
lock."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.clients.base import Connection
from pipelines.clients.comment import LOGS_MAX_DAYS, LOGS_PAGE_LIMIT, CommentClient
from pipelines.lake import Lake, file_day, file_stem
from pipelines.lake.footers import footers
from pipelines.stream import TIMESTAMP, Stream
from pipelines.streams.comment import ACCOUNTS, DAILY_STATS, TRIGGER_LOGS
from pipelines.transport import Transport

#: An account whose token expires within this many days is flagged (a warning check).
TOKEN_WARNING_DAYS = 7
#: Pages `closed_log_total` asks for at most to find today's midnight in the list: logs
#: arriving between two requests move it by a page at most, unless they come by hundreds.
LOCATE_ATTEMPTS = 5


def day_end(day: date) -> datetime:
    """The first moment after `day` (UTC): a day's figures are final from then on."""
    return datetime.combine(day + timedelta(days=1), time.min, UTC)


@dataclass(frozen=True)
class LandedDay:
    """One landed day file of a connection: its rows, and whether it was pulled after its
    day ended (`pulled_at` in its metadata, `pipelines/pull/landing.py`). A day pulled while it
    was still open holds what it had then, not the whole day."""

    rows: int
    final: bool


def closed_days(
    lake: Lake, stream: Stream, today: date, days: Collection[date] | None = None
) -> dict[tuple[str, date], LandedDay]:
    """The landed files of `stream`'s days before `today` (of `days` only, where given), by
    (connection, day), from their footers (`pipelines/lake/footers.py`). A file without `pulled_at`
    is taken as not final: nothing says when it was pulled."""
    listed = [info for info in lake.listing(stream, days) if file_day(info.path) < today]
    found = {}
    for path, footer in footers(lake, stream, listed, days).items():
        day = file_day(path)
        pulled = footer.pulled_at
        final = pulled is not None and datetime.fromisoformat(pulled) >= day_end(day)
        found[(file_stem(path), day)] = LandedDay(footer.rows, final)
    return found


@dataclass(frozen=True)
class LogsAgainstStats:
    """Closed days of trigger logs against the same days' stats."""

    days_compared: int
    #: Each day whose counts differ: connection, date, logs counted, stats' sum.
    days_mismatched: list[dict]
    #: Closed days landed on both sides but pulled on one while the day was still open:
    #: their counts may differ without anything being wrong, so they are not compared.
    days_pulled_before_they_ended: int
    #: Why nothing was compared, or None.
    nothing_compared: str | None = None

    @property
    def passed(self) -> bool:
        return self.nothing_compared is None and not self.days_mismatched


def logs_against_stats(
    lake: Lake, today: date, days: Collection[date] | None = None
) -> LogsAgainstStats:
    """Each closed day's trigger logs (of `days` only, where given) against that day's stats
    (public replies + DMs + failed): two separate endpoints of the service, so this
    reconciles them. Only days before `today` (the service's, UTC) whose files on both sides
    were pulled after the day ended are compared: a day still open keeps getting logs, and a
    file pulled before its day ended missed the rest of it."""
    logs = closed_days(lake, TRIGGER_LOGS, today, days)
    stats_relation = lake.relation(DAILY_STATS, days)
    if not logs:
        return LogsAgainstStats(0, [], 0, "trigger logs of closed days not landed")
    if stats_relation is None:
        return LogsAgainstStats(0, [], 0, "daily stats not landed")
    stats = closed_days(lake, DAILY_STATS, today, days)
    expected = {
        (c, d): n
        for c, d, n in lake.query(
            f"SELECT connection, date, public_replies + dms + failed FROM {stats_relation} "
            "WHERE date < $today",
            {"today": today},
        )
    }
    both = sorted(logs.keys() & stats.keys() & expected.keys())
    compared = [key for key in both if logs[key].final and stats[key].final]
    mismatched = [
        {"connection": c, "date": str(d), "logs": logs[(c, d)].rows, "stats": expected[(c, d)]}
        for c, d in compared
        if logs[(c, d)].rows != expected[(c, d)]
    ]
    return LogsAgainstStats(
        days_compared=len(compared),
        days_mismatched=mismatched,
        days_pulled_before_they_ended=len(both) - len(compared),
        nothing_compared=(
            None if compared else "no closed day is landed on both sides from a pull after it ended"
        ),
    )


def closed_log_total(
    client: CommentClient, today: date, landed_today: int | None, days: int = LOGS_MAX_DAYS
) -> int | None:
    """The service's trigger logs of the closed days of its last `days` (all but `today`),
    read from one answer, so that logs arriving meanwhile cannot make it disagree with itself.

    The list is newest first and its `total` counts today too. An answer whose page holds
    both the last log of today and the first one before it tells, by itself, how many of
    today's precede the closed days and how many there are in all: the difference is the
    closed days'. Where to look is guessed from today's landed rows (`landed_today`: one
    request when few logs arrived since), else from the service's count of today
    (`days=1`), which is also asked for once when the first guess's page is off.
    The page's size is chosen so that the guessed position is never a page's first, whose
    newer neighbour would be on another page. None if the list kept moving past every
    guess."""
    midnight = pa.scalar(datetime.combine(today, time.min, UTC), TIMESTAMP)

    def count_of_today() -> int:
        return client.logs(days=1, page=0, limit=1)["total"]

    asked = landed_today is None
    #: Where the first log before today's midnight is guessed to be, counted from the head.
    position = count_of_today() if landed_today is None else landed_today
    for _ in range(LOCATE_ATTEMPTS):
        limit = next(n for n in range(LOGS_PAGE_LIMIT, 1, -1) if position % n or not position)
        page = position // limit
        start = page * limit
        answer = client.log_table(days=days, page=page, limit=limit)
        listed, total = answer.logs.num_rows, answer.total
        of_today = pc.sum(pc.greater_equal(answer.logs["created_at"], midnight)).as_py() or 0
        if of_today < listed and (of_today or page == 0):
            return total - (start + of_today)  # the midnight is within this page
        if listed and of_today == listed and start + listed == total:
            return 0  # every log listed is of today
        if not listed:
            if not total:
                return 0
            position = total  # the list is shorter than guessed
        elif of_today:  # more logs of today than guessed: later
            position = start + listed if asked else max(start + listed, count_of_today())
            asked = True
        else:  # fewer (logs of today vanished): at the page's start or before it
            position = start if asked else min(start, count_of_today())
            asked = True
    return None


@dataclass(frozen=True)
class LogTotal:
    """One connection's landed trigger logs of the closed days from its first landed one
    (within the service's window) to yesterday, against the service's count of the same
    days."""

    #: None when the service's list kept moving too fast to count (`closed_log_total`), or
    #: when no closed day is landed (nothing to count).
    service_total: int | None
    landed: int
    #: The closed days compared: from the first landed to yesterday.
    days_compared: int
    days_landed: int
    #: Of `days_landed`, those pulled before the day ended: they may lack its last logs.
    days_pulled_before_they_ended: int


def log_total(transport: Transport, lake: Lake, connection: Connection, today: date) -> LogTotal:
    """The service's count of the closed days from the connection's first landed one to
    yesterday (mostly one request), and the landed files' row counts of the same days. A
    lake that starts later than the service's window (a recent `SYNC_START_DATE`) is
    compared over the days it holds; a day missing among them counts as none landed."""
    window = [today - timedelta(days=n) for n in range(1, LOGS_MAX_DAYS)]
    landed = {
        day: found
        for (name, day), found in closed_days(lake, TRIGGER_LOGS, today, window).items()
        if name == connection.name
    }
    if not landed:
        return LogTotal(None, 0, 0, 0, 0)
    compared = (today - min(landed)).days
    today_file = lake.path(TRIGGER_LOGS, connection.name, today)
    landed_today = lake.footer(today_file).num_rows if lake.exists(today_file) else None
    client = CommentClient(transport)
    return LogTotal(
        service_total=closed_log_total(client, today, landed_today, days=compared + 1),
        landed=sum(day.rows for day in landed.values()),
        days_compared=compared,
        days_landed=len(landed),
        days_pulled_before_they_ended=sum(not day.final for day in landed.values()),
    )


@dataclass(frozen=True)
class LogTotals:
    """Every connection's `LogTotal`: equal is the verdict, but it is only conclusive once
    every closed day compared is landed from a pull after it ended; until then a difference
    is expected (a backfill in progress looks so too)."""

    connections: dict[str, LogTotal]

    @property
    def equal(self) -> bool:
        return all(c.service_total == c.landed for c in self.connections.values())

    @property
    def conclusive(self) -> bool:
        return all(
            c.service_total is not None
            and c.days_landed == c.days_compared
            and not c.days_pulled_before_they_ended
            for c in self.connections.values()
        )


@dataclass(frozen=True)
class ExpiringToken:
    connection: str
    account_id: str
    handle: str
    #: As DuckDB writes a timestamp with time zone.
    token_expires_at: str


def expiring_tokens(lake: Lake) -> list[ExpiringToken] | None:
    """The landed accounts whose token expires within `TOKEN_WARNING_DAYS`, soonest first:
    their automations stop then, and reconnecting takes a person at a browser. None while
    no accounts are landed: there is nothing to look at."""
    relation = lake.relation(ACCOUNTS)
    if relation is None:
        return None
    expiring = lake.query(
        f"""
        SELECT connection, id, handle, token_expires_at::VARCHAR
        FROM {relation}
        WHERE token_expires_at < now() + INTERVAL {TOKEN_WARNING_DAYS} DAY
        ORDER BY token_expires_at
        """
    )
    return [ExpiringToken(*row) for row in expiring]
