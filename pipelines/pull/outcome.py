"""What one run of a stream landed: rows per connection and per day, the calls it took, the
connections that failed, the schema drift it met, and the figures a stream adds. The Dagster
layer reports it as metadata (`assets/factory.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date

import pyarrow as pa

from pipelines.clients.base import Connection, Service
from pipelines.lake import Lake, file_day, file_stem
from pipelines.lake.drift import Drift, place, watched_rows
from pipelines.stream import Stream
from pipelines.transport import CallStats

Rows = Iterable[dict] | Iterable[pa.Table]


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
    #: What the landed rows held that the stream's schema does not (`pipelines/lake/drift.py`).
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
        drift tallied and kept as the stream's contract says (`pipelines/lake/drift.py`)."""
        return self.watched(with_connection(rows, connection), service, stream, connection)

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
        for path in lake.files(stream, days):
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


def with_connection(rows: Rows, connection: str) -> Iterator[dict | pa.Table]:
    # One column of the name, grown as needed and sliced for each table (a page's piece of
    # a day, mostly), rather than the name repeated anew for each.
    names = pa.array([], pa.string())
    for row in rows:
        if isinstance(row, pa.Table):
            if len(names) < row.num_rows:
                names = pa.repeat(pa.scalar(connection), max(row.num_rows, 2 * len(names)))
            yield row.append_column("connection", names.slice(0, row.num_rows))
        else:
            row["connection"] = connection
            yield row
