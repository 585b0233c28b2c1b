"""The `broadcast_reports` stream, the daily snapshots of each broadcast's report: which
broadcasts a day's snapshot asks for, over which date range, and the rows they land as."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import date, timedelta
from pathlib import PurePosixPath

import pyarrow as pa

from pipelines.clients.datahub import REPORT_MAX_DAYS, Broadcast, BroadcastReport, DataHub
from pipelines.lake import Lake, file_day
from pipelines.lake.drift import extra_of
from pipelines.lake.footers import footers
from pipelines.lake.schemas import arrow_fields, model_row
from pipelines.pull.landing import PulledStream, Turn
from pipelines.stream import CONNECTION, EXTRA, described


def report_window(broadcast: Broadcast, day: date, has_snapshot: bool) -> tuple[date, date] | None:
    """The date range of `broadcast`'s report in `day`'s snapshot, or None to keep its last one.

    From the sent day, cut to the hub's 60-day range limit; figures change only inside
    that window, so a broadcast past it is re-read only while the lake holds no snapshot of it.
    """
    if broadcast.created_at is not None and broadcast.created_at.date() > day:
        return None  # it did not exist yet on `day`
    sent_day = broadcast.sent_date.date() if broadcast.sent_date else None
    if sent_day is None or sent_day > day:
        return day, day  # scheduled as of `day`: a zero report
    last_day = sent_day + timedelta(days=REPORT_MAX_DAYS - 1)
    if day <= last_day or not has_snapshot:
        return sent_day, min(last_day, day)
    return None


def report_row(broadcast_id: int, report: BroadcastReport, window: tuple[date, date]) -> dict:
    return {
        **model_row(report, BROADCAST_REPORTS.schema, extra=False),
        "broadcast_id": broadcast_id,
        "start_date": window[0],
        "end_date": window[1],
        # The report's fields the model does not declare: undocumented, so expected here,
        # not drift; `_extra` holds what else did not fit.
        "report": json.dumps(report.model_extra or {}, sort_keys=True, default=str),
        EXTRA.name: extra_of(report, own_new=False),
    }


def reported_broadcasts(lake: Lake, connection: str, except_days: Iterable[date]) -> set[int]:
    """Broadcasts with a snapshot in the lake outside `except_days` (the days being
    rewritten, whose snapshots are about to be replaced). Each file's broadcasts are read
    once, then kept with its footer (`pipelines/lake/footers.py`): an hourly run reads the
    files written since, not every day's."""
    skip, name = set(except_days), f"{connection}.parquet"
    kept = footers(
        lake, BROADCAST_REPORTS, lake.listing(BROADCAST_REPORTS), None, values_of="broadcast_id"
    )
    return {
        broadcast
        for path, footer in kept.items()
        if PurePosixPath(path).name == name and file_day(path) not in skip
        for broadcast in footer.values or ()
    }


def report_rows_by_day(turn: Turn) -> Iterator[tuple[date, list[dict]]]:
    """One list of broadcasts, then for each of the run's days one report call for each
    broadcast that day's snapshot takes (`report_window`)."""
    client = turn.client
    listed = client.list_broadcasts()
    snapshotted = reported_broadcasts(turn.lake, turn.connection.name, turn.days)
    for day in turn.days:  # oldest first: a broadcast's first snapshot lands on its first day
        rows = []
        for broadcast in listed:
            window = report_window(broadcast, day, broadcast.id in snapshotted)
            if window is None:
                continue
            report = client.get_broadcast_report(broadcast.id, *window)
            rows.append(report_row(broadcast.id, report, window))
            snapshotted.add(broadcast.id)
        yield day, rows


BROADCAST_REPORTS = PulledStream(
    DataHub.service,
    "broadcast_reports",
    pa.schema(
        [
            described("broadcast_id", pa.int64(), "The broadcast (a broadcast's `id`)."),
            *arrow_fields(BroadcastReport),
            described(
                "start_date",
                pa.date32(),
                "First day of the range the figures are over: the day the broadcast was sent "
                "(the snapshot's day while it is scheduled).",
            ),
            described(
                "end_date",
                pa.date32(),
                "Last day of the range the figures are over: the snapshot's day, but at most "
                "the 60th day from `start_date` (the service's range limit).",
            ),
            CONNECTION,
            # Further fields of the report, undocumented by the hub ("not shown"), as JSON.
            described(
                "report",
                pa.string(),
                "The report's further fields, which the service does not document, as a JSON "
                "object; `{}` when there are none.",
            ),
            EXTRA,
        ]
    ),
    daily=True,
    day="The UTC day of the snapshot: the figures as they stood that day (the partition).",
    # A broadcast has one snapshot per day; `date` is the hive folder's column (DuckDB reads
    # it from the path, also in `unique_ids_check`).
    key=("date", "broadcast_id"),
    rows=report_rows_by_day,
    description=(
        "Day D: each broadcast's figures as of D, for the broadcasts whose figures can still "
        "change (sent within 60 days, or scheduled) and those not yet in the lake."
    ),
    upstream=("broadcasts",),
)
