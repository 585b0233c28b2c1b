"""The one landing path every asset uses: connections in, Parquet files out, metadata back.

An asset supplies, per connection, the rows of its stream (plain dicts of the stream's Arrow
schema); this module opens the connection's transport, adds the `connection` column, writes
the file(s) atomically and reports rows, requests, 429s and retries as metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime, timedelta

import dagster as dg
import pyarrow as pa

from pipelines.clients.base import Connection, ServiceResource
from pipelines.lake import Lake, Stream
from pipelines.transport import CallStats, Transport


class LakeResource(dg.ConfigurableResource):
    """Where the lake and the warehouse live (`LAKE_ROOT`, `WAREHOUSE_PATH`), and the extra
    SQL folders the warehouse is built from (`WAREHOUSE_SQL`, pipelines/settings.py)."""

    lake_root: str = "data/lake"
    warehouse_path: str = "data/warehouse.duckdb"
    warehouse_sql: list[str] = []

    def lake(self) -> Lake:
        return Lake(self.lake_root)


def connection_stream(
    service: str, name: str, fields: list[tuple[str, pa.DataType]], **options
) -> Stream:
    """A pulled stream: its fields after the `connection` every row carries."""
    return Stream(service, name, pa.schema([("connection", pa.string()), *fields]), **options)


def parse_moment(text: str | None) -> datetime | None:
    """An ISO 8601 date-time of a response, or None when the service gave none."""
    return datetime.fromisoformat(text) if text else None


def pulled_at() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _with_connection(
    rows: Iterable[dict] | Iterable[pa.Table], connection: str
) -> Iterator[dict | pa.Table]:
    for row in rows:
        if isinstance(row, pa.Table):
            yield row.append_column("connection", pa.repeat(pa.scalar(connection), row.num_rows))
        else:
            row["connection"] = connection
            yield row


def call_metadata(stats: CallStats) -> dict[str, int]:
    return stats.as_metadata()


def land_snapshot(
    context: dg.AssetExecutionContext,
    resource: ServiceResource,
    lake: Lake,
    stream: Stream,
    rows_of: Callable[[Transport, Connection], Iterable[dict] | Iterable[pa.Table]],
    extra_metadata: Callable[[], dict] | None = None,
    file_metadata: Callable[[Connection], dict[str, str]] | None = None,
) -> dg.MaterializeResult:
    """Replace each connection's snapshot file of `stream` with what the service holds now
    (`file_metadata`: more of the file's metadata, asked before its rows)."""
    stats = CallStats()
    counts: dict[str, int] = {}
    for connection in resource.connections:
        metadata = {"pulled_at": pulled_at()} | (file_metadata(connection) if file_metadata else {})
        with resource.transport(connection, stats) as transport:
            rows = _with_connection(rows_of(transport, connection), connection.name)
            counts[connection.name] = lake.write(stream, connection.name, rows, metadata=metadata)
        context.log.info(f"{stream.relation} [{connection.name}]: {counts[connection.name]} rows")
    return dg.MaterializeResult(
        metadata={
            "rows": sum(counts.values()),
            "rows_per_connection": counts,
            **call_metadata(stats),
            **(extra_metadata() if extra_metadata else {}),
        }
    )


def partition_days(context: dg.AssetExecutionContext) -> list[date]:
    """The days of the run's partition range, oldest first (one pass for a whole backfill)."""
    window = context.partition_time_window
    first, end = window.start.date(), window.end.date()
    return [first + timedelta(days=n) for n in range((end - first).days)]


def land_days(
    context: dg.AssetExecutionContext,
    resource: ServiceResource,
    lake: Lake,
    stream: Stream,
    days: list[date],
    rows_by_day: Callable[
        [Transport, Connection, list[date]],
        Iterable[tuple[date, Iterable[dict] | Iterable[pa.Table] | None]],
    ],
    extra_metadata: dict | None = None,
) -> dg.MaterializeResult:
    """Land a daily stream for `days`: `rows_by_day` yields each day once with all its rows
    (dicts, or Arrow tables of rows without `connection`, in a list or an iterator consumed
    before the next day is asked for), or with None when the service holds nothing new for
    it (the landed file stays). Each
    day's file is replaced whole, and a day it does not yield gets an empty file: "pulled,
    nothing there" is state too."""
    stats = CallStats()
    counts: dict[str, int] = {}
    unchanged = 0
    wanted = set(days)
    for connection in resource.connections:
        landed: set[date] = set()
        total = 0
        with resource.transport(connection, stats) as transport:
            for day, rows in rows_by_day(transport, connection, days):
                if day not in wanted:
                    continue
                landed.add(day)
                if rows is None:
                    unchanged += 1
                    continue
                written = lake.write(
                    stream,
                    connection.name,
                    _with_connection(rows, connection.name),
                    day=day,
                    metadata={"pulled_at": pulled_at()},
                )
                total += written
        for day in wanted - landed:
            lake.write(stream, connection.name, [], day=day, metadata={"pulled_at": pulled_at()})
        counts[connection.name] = total
        context.log.info(
            f"{stream.relation} [{connection.name}]: {total} rows over {len(days)} day(s)"
        )
    return dg.MaterializeResult(
        metadata={
            "rows": sum(counts.values()),
            "rows_per_connection": counts,
            "days": len(days),
            "unchanged_days": unchanged,
            "first_day": days[0].isoformat() if days else "",
            "last_day": days[-1].isoformat() if days else "",
            **call_metadata(stats),
            **(extra_metadata or {}),
        }
    )
