"""How a pull of trigger logs reads only what changed since the last one.

The service lists the logs of its window newest first, by `page`/`limit`, with the list's
`total` (`pipelines/clients/comment.py`); the lake keeps one file per UTC day, in that same
newest-first order (`pipelines/lake/__init__.py`). A pull of a range of days goes one of three ways:

- Nothing new: a range that ends today compares the lake's `Fingerprint` of its days
  (rows, newest id) with the first page's. Equal, every day is left as landed: one request.
- New logs at the head only: the service's total grew by exactly the logs listed before
  the newest landed one. Only the pages up to it are read (`new_at_head`), and each day
  that got some is its new logs before its landed ones (`merged_days`).
- Anything else (a log vanished, the list moved, a backfill of older days): the range is
  paged once, whole (`paged_days`), from the first page holding its last day, and each day
  is yielded whole as its pages arrive.

`trigger_log_days` chooses among them: the row function of `TRIGGER_LOGS`, declared at the
end of this module.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime, time, timedelta
from itertools import groupby, repeat
from operator import attrgetter, itemgetter
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.clients.comment import (
    LOG_SCHEMA,
    LOGS_MAX_DAYS,
    LOGS_PAGE_LIMIT,
    CommentAutomation,
    CommentClient,
    LogTable,
    log_tables,
)
from pipelines.lake import Lake
from pipelines.pull.landing import PulledStream, Turn
from pipelines.pull.paging import Fetched, Page, first_page_holding, offset_pages
from pipelines.stream import connection_schema
from pipelines.streams.comment.day_counts import logs_per_day
from pipelines.streams.comment.served import served_since

#: UTC days as whole numbers: seconds since the epoch // SECONDS_A_DAY.
SECONDS_A_DAY = 86_400
EPOCH = date(1970, 1, 1)

#: A day of the range and its logs (tables of `LOG_TABLE`, newest first), or None when
#: its landed file already holds them: what the landing of a daily stream takes.
DayLogs = tuple[date, Iterable[pa.Table] | None]


class Fingerprint(NamedTuple):
    """Some days of the list in two figures. Logs only arrive at the head, so while the
    rows and the newest id stay the same, so does every log of the days."""

    rows: int
    newest_id: str | None

    @classmethod
    def of_first_page(cls, first: LogTable) -> Fingerprint:
        """The service's side, from the first page of its window: its total, its first id."""
        newest = first.logs["id"][0].as_py() if first.logs.num_rows else None
        return cls(first.total, newest)


class DayPiece(NamedTuple):
    """A run of one page's logs that fall on one UTC day, newest first."""

    day: date
    logs: pa.Table


#: A log as paging handles it: its id (to drop one read twice after a shift) and its
#: `created_at` in seconds since the epoch (to stop past the range); the log itself stays in
#: its page's table, at its index, until its day's piece is cut out of it. A plain tuple read
#: by position: a year is a million of them, and a named tuple each slowed the pull
#: (bench: pull).
_Listed = tuple[str, int, pa.Table, int]
ID, MOMENT, PAGE, INDEX = range(4)


def trigger_log_days(turn: Turn) -> Iterator[DayLogs]:
    """Each day of the run (oldest first, none before the window the service serves) with
    its logs, read the cheapest way the lake allows (see the module's docstring); it logs
    which way it took."""
    client, lake, connection, days, today = (
        turn.client,
        turn.lake,
        turn.connection.name,
        turn.days,
        turn.today(),
    )
    window_days = served_since(days, LOGS_MAX_DAYS, "Trigger logs", today)
    first = client.log_table(days=window_days, page=0)
    if days[-1] == today:
        landed = landed_fingerprint(lake, connection, days)
        if landed == Fingerprint.of_first_page(first):
            turn.log("nothing new since the last pull")
            for day in days:
                yield day, None
            return
        head = None if landed is None else new_at_head(client, window_days, first, landed)
        if head is not None:
            head_days = pc.cast(head["created_at"], pa.date32())
            if set(head_days.to_pylist()) <= set(days):
                turn.log(f"{head.num_rows} new since the last pull")
                yield from merged_days(lake, connection, days, head, head_days)
                return
    yield from paged_days(client, window_days, first, days)


def landed_fingerprint(lake: Lake, connection: str, days: list[date]) -> Fingerprint | None:
    """The lake's side, or None if one of the days was never landed. The files keep the
    service's newest-first order, so the newest id is the newest day's first row."""
    rows, newest = 0, None
    for day in sorted(days, reverse=True):
        path = lake.path(TRIGGER_LOGS, connection, day)
        if not lake.exists(path):
            return None
        landed = lake.parquet_file(path)
        rows += landed.metadata.num_rows
        if newest is None and landed.metadata.num_rows:
            newest = landed.read_row_group(0, columns=["id"]).column("id")[0].as_py()
    return Fingerprint(rows, newest)


def new_at_head(
    client: CommentClient, window_days: int, first: LogTable, landed: Fingerprint
) -> pa.Table | None:
    """The logs listed before the newest landed one, when they are all that changed: the
    service's total grew by exactly their number, and it stayed put while they were read.
    None otherwise (a log vanished, or the list moved): the caller pages the range whole."""
    new = first.total - landed.rows
    if landed.newest_id is None or new <= 0:
        return None
    pages = [first.logs]
    # The newest landed log sits at position `new`: read the pages up to it, no further.
    for page in range(1, new // LOGS_PAGE_LIMIT + 1):
        answer = client.log_table(days=window_days, page=page)
        if answer.total != first.total:
            return None
        pages.append(answer.logs)
    listed = pa.concat_tables(pages)
    if listed.num_rows <= new or listed["id"][new].as_py() != landed.newest_id:
        return None
    head = listed.slice(0, new)
    return head if pc.count_distinct(head["id"]).as_py() == new else None


def merged_days(
    lake: Lake, connection: str, days: list[date], head: pa.Table, head_days: pa.Array
) -> Iterator[DayLogs]:
    """Each day of `days` that got new logs (`head_days`: the UTC day of each): its new logs,
    newest first, before its landed ones (the files keep the service's order); the other
    days unchanged."""
    for day in days:
        new = head.filter(pc.equal(head_days, pa.scalar(day, pa.date32())))
        if not new.num_rows:
            yield day, None
            continue
        # Whole, `_extra` included (a file landed before it was declared has none: the
        # lake's writer adds it).
        landed = lake.read_table(lake.path(TRIGGER_LOGS, connection, day))
        yield day, [new, landed.drop_columns("connection")]


def paged_days(
    client: CommentClient, window_days: int, first: LogTable, days: list[date]
) -> Iterator[DayLogs]:
    """Page the newest-first list once for the whole range, yielding each day whole. Each
    day streams into its file as its pages arrive: memory holds a row group, never a day or
    the history."""
    start = datetime.combine(days[0], time.min, UTC)
    end = datetime.combine(days[-1] + timedelta(days=1), time.min, UTC)
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
    listing = _Listing(client, window_days, first)
    pieces = day_pieces(
        listing.fetch,
        listing.decode,
        start_page=start_page,
        start_at=int(start.timestamp()),
        end_at=int(end.timestamp()),
    )
    for day, same_day in groupby(pieces, key=attrgetter("day")):
        yield day, (piece.logs for piece in same_day)


class _Listing:
    """The list's pages as `offset_pages` fetches and decodes them: each answer as it came
    (read-ahead threads fetch them), then those arrived read together (`log_tables`). The
    first page, already read to choose the way, is used once; a later look at page 0 (after
    a shift) asks again."""

    def __init__(self, client: CommentClient, window_days: int, first: LogTable) -> None:
        self._client = client
        self._window_days = window_days
        self._unused_first: LogTable | None = first

    def fetch(self, page: int) -> tuple[int, bytes | LogTable]:
        # Read-ahead threads fetch only pages after the current one, never page 0.
        if page == 0 and self._unused_first is not None:
            answer, self._unused_first = self._unused_first, None
            return page, answer
        return page, self._client.log_body(days=self._window_days, page=page)

    def decode(self, fetched: list[tuple[int, bytes | LogTable]]) -> list[Page[_Listed]]:
        bodies = [answer for _, answer in fetched if isinstance(answer, bytes)]
        read = iter(log_tables(bodies) if bodies else ())
        return [
            self._page(
                answer
                if isinstance(answer, LogTable)
                # One Arrow cannot read fast is asked for again, and read the general way.
                else next(read) or self._client.log_table(days=self._window_days, page=page)
            )
            for page, answer in fetched
        ]

    @staticmethod
    def _page(answer: LogTable) -> Page[_Listed]:
        table = answer.logs
        ids = table["id"].to_pylist()
        # Whole seconds since the epoch (integer division: every moment is after 1970), the
        # unit the range's bounds and days are counted in.
        micros = pc.cast(table["created_at"], pa.int64())
        moments = pc.divide(micros, 1_000_000).to_pylist()
        return Page(list(zip(ids, moments, repeat(table), range(table.num_rows))), answer.total)


def day_pieces(
    fetch: Callable[[int], Fetched],
    decode: Callable[[list[Fetched]], list[Page[_Listed]]],
    *,
    start_page: int,
    start_at: int,
    end_at: int,
) -> Iterator[DayPiece]:
    """The logs of [`start_at`, `end_at`) (seconds since the epoch), newest first, as runs of
    one page on one day; a repeat after a shift of the list is dropped by id. A batch is
    newest first, so each bound is found by bisection, not by looking at every log."""
    last_day: int | None = None
    for batch in offset_pages(
        fetch,
        decode=decode,
        limit=LOGS_PAGE_LIMIT,
        row_id=itemgetter(ID),
        start_page=start_page,
        stop=lambda listed: listed[MOMENT] < start_at,
    ):
        # A log of a day after the last one landed arrived at the head after its day was
        # landed (seen again after a step back): the next run re-pulls that day; landing it
        # would replace the day.
        bound = end_at if last_day is None else min(end_at, (last_day + 1) * SECONDS_A_DAY)
        first = _first_before(batch, bound, 0)
        while first < len(batch):
            day = batch[first][MOMENT] // SECONDS_A_DAY
            after = _first_before(batch, day * SECONDS_A_DAY, first)
            yield _piece(day, batch[first:after])
            first, last_day = after, day


def _first_before(batch: list[_Listed], moment: int, low: int) -> int:
    """The index of the first log of `batch` (newest first) from `low` on that is older
    than `moment`."""
    return bisect_left(batch, True, lo=low, key=lambda listed: listed[MOMENT] < moment)


def _piece(day: int, run: list[_Listed]) -> DayPiece:
    """The logs of `run` (of one page, on UTC day number `day`) as a table: a slice when
    they are a whole run of the page (as they mostly are), else a `take`."""
    first = run[0]
    if run[-1][INDEX] - first[INDEX] + 1 == len(run):
        logs = first[PAGE].slice(first[INDEX], len(run))
    else:
        logs = first[PAGE].take([listed[INDEX] for listed in run])
    return DayPiece(EPOCH + timedelta(days=day), logs)


TRIGGER_LOGS = PulledStream(
    CommentAutomation.service,
    "trigger_logs",
    connection_schema(LOG_SCHEMA),
    daily=True,
    day="The UTC day of `created_at` (the partition).",
    history_days=LOGS_MAX_DAYS,
    served_days=LOGS_MAX_DAYS,
    rows=trigger_log_days,
    hourly=True,
    day_counts=logs_per_day,
    description=(
        "Every trigger log (one row per public reply or DM attempt), by UTC day of "
        "`created_at`. A range is paged once, newest first, deduplicated by id and repaired "
        "when the list shifts; the service keeps 365 days."
    ),
)
