"""The one landing path every stream uses: connections in, Parquet files out, figures back.

A stream supplies, per connection, its rows (plain dicts of the stream's Arrow schema, or
Arrow tables without `connection`); this module opens the connection's transport, adds the
`connection` column, writes the file(s) atomically and returns what it landed and the calls
it took. A stream's landing is a function of a `Pull` (what one run works with); the Dagster
layer makes one asset of each (`assets/factory.py`) and reports `Landed.metadata`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import pyarrow as pa

from pipelines.clients.base import Connection, Service
from pipelines.clients.failures import each_connection
from pipelines.drift import Drift, place, watched_rows
from pipelines.errors import ServiceRefused
from pipelines.lake import Lake, file_day, file_stem
from pipelines.stream import Stream
from pipelines.transport import CallStats, Transport

Rows = Iterable[dict] | Iterable[pa.Table]
#: A snapshot stream's rows of one connection.
RowsOf = Callable[[Transport, Connection], Rows]
#: A daily stream's rows of one connection: each day once, with its rows, or None when the
#: service holds nothing new for it.
RowsByDay = Callable[[Transport, Connection, list[date]], Iterable[tuple[date, Rows | None]]]
Log = Callable[[str], None]


@dataclass
class Landed:
    """What one landing wrote, per connection, and the calls it took."""

    rows_per_connection: dict[str, int] = field(default_factory=dict)
    stats: CallStats = field(default_factory=CallStats)
    #: A daily stream's days, each with what it landed per connection: its rows, or None
    #: where the service held nothing new (the landed file stays).
    per_day: dict[date, dict[str, int | None]] = field(default_factory=dict)
    #: Days of the run older than the service still serves: not asked for, files kept.
    not_served: list[date] = field(default_factory=list)
    #: What else the stream reports (failed accounts, the backup's own row count, ...).
    figures: dict = field(default_factory=dict)
    #: Connections that failed, each with what went wrong and what to do
    #: (`pipelines/clients/failures.py`); the others landed.
    failed: dict[str, str] = field(default_factory=dict)
    #: What the landed rows held that the stream's schema does not (`pipelines/drift.py`).
    drift: Drift = field(default_factory=Drift)

    @property
    def rows(self) -> int:
        return sum(self.rows_per_connection.values())

    @property
    def unchanged_days(self) -> int:
        """Day files the run kept because the service held nothing new for them."""
        return sum(rows is None for day in self.per_day.values() for rows in day.values())

    def landed_day(self, day: date, connection: str, rows: int | None) -> None:
        self.per_day.setdefault(day, {})[connection] = rows

    def in_order_of(self, connections: list[Connection]) -> Landed:
        """Its figures per connection in the order the connections are configured, not the
        order their turns ended in (they land at once: `each_connection`)."""
        order = {connection.name: n for n, connection in enumerate(connections)}
        self.rows_per_connection = dict(
            sorted(self.rows_per_connection.items(), key=lambda item: order[item[0]])
        )
        self.failed = dict(sorted(self.failed.items(), key=lambda item: order[item[0]]))
        return self

    def metadata(self, days: list[date] | None) -> dict:
        """Rows, per connection, the run's days for a partitioned stream, calls, figures:
        the run's own figures (each day's are `day_metadata`)."""
        described: dict = {"rows": self.rows, "rows_per_connection": self.rows_per_connection}
        if days is not None:
            described |= {
                "days": len(days),
                "unchanged_days": self.unchanged_days,
                "not_served_days": len(self.not_served),
                "first_day": days[0].isoformat() if days else "",
                "last_day": days[-1].isoformat() if days else "",
            }
        if self.failed:
            described["failed_connections"] = self.failed
        described["schema_drift"] = self.drift.report()
        return described | self.stats.as_metadata() | self.figures

    def rows_to_land(
        self, rows: Rows, service: Service, stream: Stream, connection: str
    ) -> Iterator[dict | pa.Table]:
        """`rows` of one connection as the lake takes them: with their `connection`, their
        drift tallied and kept as the stream's contract says (`pipelines/drift.py`)."""
        return self.watched(_with_connection(rows, connection), service, stream, connection)

    def watched(
        self, rows: Rows, service: Service, stream: Stream, connection: str
    ) -> Iterator[dict | pa.Table]:
        """Rows that carry their `connection` already, their drift tallied and kept as the
        stream's contract says."""
        where = place(service.service, connection, stream.relation)
        contract = service.contract(stream.name)
        return watched_rows(rows, self.drift, contract, where)

    def day_metadata(self, lake: Lake, stream: Stream, days: list[date]) -> dict[date, dict]:
        """Each day's own figures after the run: the rows the lake holds for it per
        connection (read from the files' footers, so a kept file counts too) and what the
        run did to it."""
        first, last = days[0], days[-1]
        files_of: dict[date, list[str]] = {}
        for path in lake.files(stream):  # one listing, not one a day: on a store, a request
            files_of.setdefault(file_day(path), []).append(path)
        described = {}
        for day in days:
            landed = self.per_day.get(day, {})
            if day in self.not_served:
                outcome = "not served: older than the service serves; landed files kept"
            elif landed and all(rows is None for rows in landed.values()):
                outcome = "unchanged: the service held nothing new; landed files kept"
            else:
                outcome = "landed"
            held = {file_stem(path): lake.footer(path).num_rows for path in files_of.get(day, [])}
            described[day] = {
                "rows": sum(held.values()),
                "rows_per_connection": held,
                "outcome": outcome,
                "run_days": f"{first} to {last} ({len(days)} days)",
            }
        return described


def served_days(stream: Stream, days: list[date], today: date) -> tuple[list[date], list[date]]:
    """`days` split into those the service still serves and the older ones it no longer
    does (`Stream.served_days`): asking for those would fail or land them empty."""
    if stream.served_days is None:
        return days, []
    oldest = today - timedelta(days=stream.served_days - 1)
    return [d for d in days if d >= oldest], [d for d in days if d < oldest]


class Refused(ServiceRefused):
    """A landing that must not go on, with all there is to say in its message (no traceback
    helps a reader) and the figures gathered so far."""

    def __init__(self, message: str, figures: dict | None = None) -> None:
        super().__init__(message)
        self.figures = figures or {}


@dataclass
class Pull:
    """What one run of a stream's landing works with: the service's settings and
    connections, the lake, the stream, where to say what happens, and for a partitioned
    stream the run's days (oldest first)."""

    service: Service
    lake: Lake
    stream: Stream
    log: Log
    warn: Log
    days: list[date] | None = None

    def snapshot(
        self, rows_of: RowsOf, file_metadata: Callable[[Connection], dict[str, str]] | None = None
    ) -> Landed:
        return land_snapshot(self.service, self.lake, self.stream, rows_of, self.log, file_metadata)

    def daily(self, rows_by_day: RowsByDay) -> Landed:
        return land_days(
            self.service, self.lake, self.stream, self.days or [], rows_by_day, self.log
        )


#: A stream's landing: what one run lands of it.
Land = Callable[[Pull], Landed]


def pulled_at() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def today() -> date:
    """The services' day: UTC, the wall clock's."""
    return datetime.now(UTC).date()


def _with_connection(rows: Rows, connection: str) -> Iterator[dict | pa.Table]:
    # One column of the name, sliced for each table (a page's piece of a day, mostly):
    # repeating the name for each was slow over a year of trigger logs.
    names = pa.array([], pa.string())
    for row in rows:
        if isinstance(row, pa.Table):
            if len(names) < row.num_rows:
                names = pa.repeat(pa.scalar(connection), max(row.num_rows, 2 * len(names)))
            yield row.append_column("connection", names.slice(0, row.num_rows))
        else:
            row["connection"] = connection
            yield row


def land_snapshot(
    service: Service,
    lake: Lake,
    stream: Stream,
    rows_of: RowsOf,
    log: Log,
    file_metadata: Callable[[Connection], dict[str, str]] | None = None,
) -> Landed:
    """Replace each connection's snapshot file of `stream` with what the service holds now
    (`file_metadata`: more of the file's metadata, asked before its rows)."""
    landed = Landed()

    def turn(connection: Connection) -> None:
        with service.transport(connection, landed.stats) as transport:
            metadata = {"pulled_at": pulled_at()} | (
                file_metadata(connection) if file_metadata else {}
            )
            rows = landed.rows_to_land(
                rows_of(transport, connection), service, stream, connection.name
            )
            written = lake.write(stream, connection.name, rows, metadata=metadata)
        landed.rows_per_connection[connection.name] = written
        log(f"{stream.relation} [{connection.name}]: {written} rows")

    each_connection(service, landed.failed, turn)
    return landed.in_order_of(service.connections)


def land_days(
    service: Service,
    lake: Lake,
    stream: Stream,
    days: list[date],
    rows_by_day: RowsByDay,
    log: Log,
) -> Landed:
    """Land a daily stream for `days`: `rows_by_day` yields each day once with all its rows
    (in a list or an iterator consumed before the next day is asked for), or with None when
    the service holds nothing new for it (the landed file stays). Each day's file is replaced
    whole, and a day it does not yield gets an empty file: "pulled, nothing there" is state
    too."""
    landed = Landed()
    wanted = set(days)

    def turn(connection: Connection) -> None:
        rows = _land_connection_days(
            service, lake, stream, connection, wanted, days, rows_by_day, landed
        )
        landed.rows_per_connection[connection.name] = rows
        log(f"{stream.relation} [{connection.name}]: {rows} rows over {len(days)} day(s)")

    each_connection(service, landed.failed, turn)
    return landed.in_order_of(service.connections)


def _land_connection_days(
    service: Service,
    lake: Lake,
    stream: Stream,
    connection: Connection,
    wanted: set[date],
    days: list[date],
    rows_by_day: RowsByDay,
    landed: Landed,
) -> int:
    """One connection's turn of `land_days`: the rows it wrote."""
    seen: set[date] = set()
    total = 0
    with service.transport(connection, landed.stats) as transport:
        for day, rows in rows_by_day(transport, connection, days):
            if day not in wanted:
                continue
            seen.add(day)
            if rows is None:
                landed.landed_day(day, connection.name, None)
                continue
            written = lake.write(
                stream,
                connection.name,
                landed.rows_to_land(rows, service, stream, connection.name),
                day=day,
                metadata={"pulled_at": pulled_at()},
            )
            landed.landed_day(day, connection.name, written)
            total += written
    for day in sorted(wanted - seen):
        lake.write(stream, connection.name, [], day=day, metadata={"pulled_at": pulled_at()})
        landed.landed_day(day, connection.name, 0)
    return total
