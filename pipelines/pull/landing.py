"""The one landing path every pulled stream uses: connections in, Parquet files out, figures back.

A pulled stream is declared once (`PulledStream`): what the lake keeps of it, what the
catalog says of it, and its row function. A row function takes one `Turn` (one connection's
part of a run: its client, the lake, the run's days, the clock, where to log) and returns
the connection's rows: for a snapshot stream its rows (plain dicts of the stream's Arrow
schema, or Arrow tables, without `connection`), for a daily stream each day with its rows.
`land` runs it for every connection at once, adds the `connection` column, writes the files
atomically and returns what it landed (`pipelines/pull/outcome.py`). The Dagster layer makes one
asset of each declaration (`assets/factory.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pipelines.clients.base import Connection, Service
from pipelines.clients.failures import each_connection
from pipelines.lake import Lake
from pipelines.pull.outcome import Landed, Rows
from pipelines.pull.progress import TurnProgress, turn_started
from pipelines.stream import Stream
from pipelines.transport import Transport

Log = Callable[[str], None]
#: A daily stream's rows of one connection: each day once, with its rows, or None when the
#: service holds nothing new for it (the landed file stays).
DayRows = Iterable[tuple[date, Rows | None]]


@dataclass(frozen=True)
class PulledStream(Stream):
    """A stream pulled from a service, declared once: what the lake keeps (`Stream`), what
    the catalog says of it, and how a run fetches it."""

    #: What the catalog and the Dagster UI say of the stream.
    description: str = ""
    #: Its row function: `rows(turn)`, a snapshot's rows or a daily stream's `DayRows`.
    rows: Callable[[Turn], Rows | DayRows] | None = None
    #: Instead of `rows`, for a file the service hands whole each run (a backup, an
    #: export): `lands(turn)` writes the connection's files as they download, since a cut
    #: download starts over, and returns the rows it wrote.
    lands: Callable[[Turn], int] | None = None
    #: Streams of the same service it comes after: a sync lands them first, and the Dagster
    #: UI draws the lineage.
    upstream: tuple[str, ...] = ()
    #: Streams whose landed files its rows are made from: a run refuses to start while a
    #: connection has none of them (it would land nothing and say nothing), naming what to run
    #: (`pipelines/stream_run.py`, `refuse_without_sources`).
    reads: tuple[Stream, ...] = ()
    #: What its files are made from besides Python and Parquet (kinds in the Dagster UI).
    formats: frozenset[str] = frozenset()
    #: A daily stream whose every run lands the day it runs on: no past day can be asked for,
    #: so it has no partitions.
    today_only: bool = False
    #: Pulled every hour (it changes all day: its service's recent-days schedule in
    #: `assets/definitions.py`), else daily; Dagster's freshness policy follows.
    hourly: bool = False
    #: A daily stream whose rows can move between days (a log's `created_at`, as the service
    #: serves it): `day_counts(client, days, today)`, the service's own count of rows of
    #: each closed day of `days`. A range backfill compares the landed days beyond its edges
    #: with it (`pipelines/pull/edges.py`); without it they are not compared.
    day_counts: Callable[[Any, Collection[date], date], dict[date, int]] | None = None

    def __post_init__(self) -> None:
        if (self.rows is None) == (self.lands is None):
            raise TypeError(f"{self.relation}: declare either `rows` or `lands`")

    @property
    def partitioned(self) -> bool:
        """Whether a run is for days the user picks (daily partitions in the UI)."""
        return self.daily and not self.today_only


def today() -> date:
    """The services' day: UTC, the wall clock's."""
    return datetime.now(UTC).date()


def pulled_at() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Pull:
    """One run of a stream's landing: the service's settings and connections, the lake, the
    stream, where to say what happens, the run's days (a partitioned stream's, oldest
    first) and the clock that says which day the service is on."""

    service: Service
    lake: Lake
    stream: PulledStream
    log: Log
    warn: Log
    days: list[date] | None = None
    clock: Callable[[], date] = today


@dataclass
class Turn:
    """What a row function works with: one connection's part of one run."""

    pull: Pull
    connection: Connection
    transport: Transport
    landed: Landed
    #: More metadata of the connection's file(s): a row function sets it before it
    #: returns its rows.
    file_metadata: dict[str, str] = field(default_factory=dict)
    #: How far the turn is, for a live display (`pipelines/pull/progress.py`).
    progress: TurnProgress = field(default_factory=TurnProgress)

    @property
    def service(self) -> Any:
        return self.pull.service

    @property
    def client(self) -> Any:
        """The service's client over this connection's transport."""
        return self.pull.service.client(self.transport)

    @property
    def lake(self) -> Lake:
        return self.pull.lake

    @property
    def stream(self) -> PulledStream:
        return self.pull.stream

    @property
    def days(self) -> list[date]:
        return self.pull.days or []

    def today(self) -> date:
        """The service's day now."""
        return self.pull.clock()

    def log(self, line: str) -> None:
        self.pull.log(f"{self.stream.relation} [{self.connection.name}]: {line}")

    def warn(self, line: str) -> None:
        self.pull.warn(f"{self.stream.relation} [{self.connection.name}]: {line}")

    def report(self, figure: str, value: object) -> None:
        """A figure of the run, per connection (`{connection: value}` in the metadata)."""
        self.landed.figures.setdefault(figure, {})[self.connection.name] = value

    def landed_day(self, day: date, rows: int | None) -> None:
        """What the turn did to a day of the run: its rows, or None where it kept the file."""
        self.landed.landed_day(day, self.connection.name, rows)
        self.progress.day_landed(rows)


def land(pull: Pull) -> Landed:
    """Land `pull.stream` through every connection at once; a connection that fails is
    recorded with what to do (`pipelines/clients/failures.py`) and the others still land."""
    stream, landed = pull.stream, Landed()

    def turn(connection: Connection) -> None:
        asked = len(pull.days) if pull.days is not None else None
        progress = turn_started(stream.relation, connection.name, asked, landed.stats)
        try:
            with pull.service.transport(connection, progress.stats) as transport:
                here = Turn(pull, connection, transport, landed, progress=progress)
                if stream.lands is not None:
                    rows = stream.lands(here)
                elif stream.daily:
                    rows = _land_days(here)
                else:
                    rows = _land_snapshot(here)
        except BaseException:
            progress.end(failed=True)
            raise
        progress.end(rows)
        landed.rows_per_connection[connection.name] = rows
        days = f" over {asked} day(s)" if asked is not None else ""
        pull.log(f"{stream.relation} [{connection.name}]: {rows} rows{days}")

    each_connection(pull.service, landed.failed, turn)
    return landed.in_order_of(pull.service.connections)


def _land_snapshot(turn: Turn) -> int:
    """Replace the connection's snapshot file with what the service holds now."""
    metadata = {"pulled_at": pulled_at()}
    rows = turn.stream.rows(turn)
    return turn.lake.write(
        turn.stream,
        turn.connection.name,
        turn.landed.rows_to_land(rows, turn.service, turn.stream, turn.connection.name),
        metadata=metadata | turn.file_metadata,
    )


def _land_days(turn: Turn) -> int:
    """Land the run's days: the row function yields each day once with all its rows (in a
    list or an iterator consumed before the next day is asked for), or with None when the
    service holds nothing new for it (the landed file stays). Each day's file is replaced
    whole, and a day it does not yield gets an empty file: "pulled, nothing there" is state
    too."""
    stream, lake, name, landed = turn.stream, turn.lake, turn.connection.name, turn.landed
    wanted, seen, total = set(turn.days), set(), 0
    for day, rows in turn.stream.rows(turn):
        if day not in wanted:
            continue
        seen.add(day)
        if rows is None:
            turn.landed_day(day, None)
            continue
        written = lake.write(
            stream,
            name,
            landed.rows_to_land(rows, turn.service, stream, name),
            day=day,
            metadata={"pulled_at": pulled_at()} | turn.file_metadata,
        )
        turn.landed_day(day, written)
        total += written
    for day in sorted(wanted - seen):
        lake.write(stream, name, [], day=day, metadata={"pulled_at": pulled_at()})
        turn.landed_day(day, 0)
    return total


def served_days(stream: Stream, days: list[date], today: date) -> tuple[list[date], list[date]]:
    """`days` split into those the service still serves and the older ones it no longer
    does (`Stream.served_days`): asking for those would fail or land them empty."""
    if stream.served_days is None:
        return days, []
    oldest = today - timedelta(days=stream.served_days - 1)
    return [d for d in days if d >= oldest], [d for d in days if d < oldest]
