"""Landing as Dagster sees it: the core's landing (`pipelines/landing.py`) run for an asset,
its figures returned as the materialization's metadata (rows, rows per connection, requests,
429s, retries; for daily streams the days and the range)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

import dagster as dg

from pipelines import landing
from pipelines.clients.base import Connection, Service
from pipelines.lake import Lake, Stream


def land_snapshot(
    context: dg.AssetExecutionContext,
    resource: Service,
    lake: Lake,
    stream: Stream,
    rows_of: landing.RowsOf,
    extra_metadata: Callable[[], dict] | None = None,
    file_metadata: Callable[[Connection], dict[str, str]] | None = None,
) -> dg.MaterializeResult:
    """Each connection's snapshot file of `stream` replaced (`landing.land_snapshot`);
    `extra_metadata` is asked once the files are written."""
    landed = landing.land_snapshot(resource, lake, stream, rows_of, context.log.info, file_metadata)
    return dg.MaterializeResult(
        metadata={
            "rows": landed.rows,
            "rows_per_connection": landed.rows_per_connection,
            **landed.stats.as_metadata(),
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
    resource: Service,
    lake: Lake,
    stream: Stream,
    days: list[date],
    rows_by_day: landing.RowsByDay,
    extra_metadata: dict | None = None,
) -> dg.MaterializeResult:
    """`days` of a daily stream landed (`landing.land_days`)."""
    landed = landing.land_days(resource, lake, stream, days, rows_by_day, context.log.info)
    return dg.MaterializeResult(
        metadata={
            "rows": landed.rows,
            "rows_per_connection": landed.rows_per_connection,
            "days": len(days),
            "unchanged_days": landed.unchanged_days,
            "first_day": days[0].isoformat() if days else "",
            "last_day": days[-1].isoformat() if days else "",
            **landed.stats.as_metadata(),
            **(extra_metadata or {}),
        }
    )
