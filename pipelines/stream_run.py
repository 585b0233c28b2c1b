"""One run of a pulled stream, whatever starts it (a Dagster step, the command line): set
aside the damaged files of its own days, keep the days its service still serves, land them
(`pipelines/pull/landing.py`), write the run's row of `sync.runs` and bring the views up to date.
It returns what happened; the Dagster layer only turns that into events and metadata
(`assets/factory.py`).

Which days a run lands is the one day policy (`days_to_sync`): the days asked for, else
the days of the service's window the lake is missing plus yesterday and today, never before
the first day any run lands (`first_sync_day`, the first daily partition in the UI).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import PurePosixPath

import pyarrow as pa

from pipelines.errors import SetupError, SyncError, first_line
from pipelines.lake import Lake, LakeLocation, file_day, file_stem
from pipelines.lake.object_store import lake_fault
from pipelines.lake.run_history import (
    RUNS,
    RunRecord,
    connection_outcomes,
    merge_history,
    outcome_of,
    record_run,
)
from pipelines.pull.damaged import set_aside_damaged
from pipelines.pull.landing import Log, Pull, PulledStream, land, served_days, today
from pipelines.pull.outcome import Landed
from pipelines.registry import PULLED
from pipelines.stream import Stream
from pipelines.warehouse import Written
from pipelines.warehouse.relations import refresh_warehouse

#: What a run says of the views when its starter brings them up to date after it.
VIEWS_LEFT = "views brought up to date when the sync ends"


def first_day(on: date) -> date:
    """The oldest day any daily stream's first sync reaches (`Stream.history_days`), counted
    back from `on`. The partitions start there, not at a fixed date, so that the UI never
    shows a year of days the services stopped serving long ago; a day that slips out of a
    service's window while a process runs says so when run (`run_stream`), it does not
    fail."""
    return on - timedelta(days=max(s.history_days for s in PULLED if s.daily) - 1)


#: Where a deployment that starts later than the services' windows says so.
START_VARIABLE = "SYNC_START_DATE"


def first_sync_day() -> date:
    """The first day any run lands, and the first daily partition in the UI: SYNC_START_DATE
    (`YYYY-MM-DD`) where a deployment starts later, else `first_day` of today."""
    value = os.environ.get(START_VARIABLE, "").strip()
    if not value:
        return first_day(today())
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise SetupError(
            f"{START_VARIABLE}={value!r} is not a day: give one as YYYY-MM-DD, or unset it to "
            "start at the oldest day the services serve"
        ) from None


@dataclass
class StreamRun:
    """What one run of a stream did."""

    stream: PulledStream
    lake: Lake
    #: The run's days, oldest first (None: a snapshot, or a stream of today only).
    days: list[date] | None
    landed: Landed

    def failure(self) -> str:
        """Why the run failed where connections failed: each one and what to do, and which
        landed."""
        failed = "\n".join(f"- {reason}" for reason in self.landed.failed.values())
        landed_too = ", ".join(self.landed.rows_per_connection) or "none"
        return (
            f"{self.stream.relation}: {len(self.landed.failed)} connection(s) failed (the "
            f"others landed: {landed_too}):\n{failed}"
        )


def service_window(stream: PulledStream, on: date | None = None) -> list[date]:
    """The days a first sync of `stream` lands: those its service still serves, up to `on`
    (today), newest first."""
    last = on or today()
    return [last - timedelta(days=n) for n in range(stream.history_days)]


def days_to_sync(
    stream: PulledStream,
    lake: Lake,
    connections: Collection[str],
    on: date | None = None,
    since: date | None = None,
) -> tuple[date, date]:
    """The days a run lands when none are asked for: from the oldest day of the service's
    window (`service_window`, from `since`, else `first_sync_day`) that a
    connection's files lack, else yesterday, to today. On an empty lake that is the whole
    window; on a synced one, yesterday and today (the days that can still change)."""
    last = on or today()
    since = since or first_sync_day()
    window = [d for d in service_window(stream, last) if d >= since]
    # One listing for every connection, not a read a day.
    landed = {(file_stem(path), file_day(path)) for path in lake.files(stream, window)}
    missing = [d for d in window if any((c, d) not in landed for c in connections)]
    return min([*missing, last - timedelta(days=1)]), last


def run_stream(
    stream: PulledStream,
    service,
    location: LakeLocation,
    days: list[date] | None,
    *,
    run_id: str,
    started_by: str,
    log: Log,
    warn: Log,
    build_views: bool = True,
) -> StreamRun:
    """Land `stream` through every connection of `service` for `days` (a partitioned
    stream's; None for the rest). A connection that fails does not stop the others: it is
    in `landed.failed` and the caller fails for it. `build_views=False` leaves the views to
    the caller, which builds them once after several runs (`written_by` says what for)."""
    started_at = datetime.now(UTC)
    lake = location.lake()
    refuse_without_sources(stream, lake, [c.name for c in service.connections])
    run = StreamRun(stream, lake, days, Landed())
    # The run's own days only, each page read (a day may be merged with what it holds):
    # the sync sets aside the rest before choosing its range, and the check
    # `files_readable` names them meanwhile.
    own_days = set(days) if days is not None and stream.daily else None
    try:
        damaged = set_aside_damaged(lake, stream, own_days, pages=True)
    except OSError as error:  # the lake's disk or store, before anything was pulled
        fault = lake_fault(error, location.lake_root)
        if fault is None:
            raise
        raise fault from None
    for found in damaged:
        again = "" if found.foreign else ", landed again"
        warn(f"{stream.relation}: {found.what} set aside{again}: {found}")
    served, not_served = served_days(stream, days or [], today())
    if not_served:
        warn(
            f"{stream.relation}: {len(not_served)} day(s) from {not_served[0]} to "
            f"{not_served[-1]} are older than the service serves ({stream.served_days} "
            "days): not asked for; what the lake landed of them before stays."
        )
    pull = Pull(
        service=service,
        lake=lake,
        stream=stream,
        log=log,
        warn=warn,
        days=served if stream.partitioned else None,
    )
    record = partial_record(run_id, started_by, stream, started_at, days)
    try:
        run.landed = land(pull) if served or not stream.partitioned else Landed()
    except Exception as error:
        write_record(lake, record(Landed(), first_line(error)), warn)
        raise
    landed = run.landed
    landed.not_served = not_served
    if damaged:
        landed.figures["damaged_set_aside"] = [str(found) for found in damaged]
    if landed.drift:
        warn(
            f"{stream.relation}: the service sent what its declared schema does not hold "
            f"({landed.drift.summary()}); contract {service.contract(stream.name)}: "
            "see `_extra` and the check schema_matches"
        )
    write_record(lake, record(landed, None), warn)
    if build_views:
        refresh_views(location, written_by(stream, days, started_at), log, warn)
    else:
        log(f"warehouse: {VIEWS_LEFT}")
    return run


class SourcesNotLanded(SetupError):
    """A stream made from other streams' files was asked for before they were landed."""


def refuse_without_sources(stream: PulledStream, lake: Lake, connections: list[str]) -> None:
    """Raise `SourcesNotLanded` when a connection has no file of a stream `stream` reads
    (`PulledStream.reads`): its run would land no row and say nothing, as members did on a
    lake without messages."""
    for source in stream.reads:
        landed = {PurePosixPath(path).name for path in lake.files(source)}
        missing = [name for name in connections if f"{name}.parquet" not in landed]
        if missing:
            raise SourcesNotLanded(
                f"{stream.relation} is made from {source.relation}, which is not landed for "
                f"{', '.join(missing)}: run `python -m cli sync --streams "
                f"{source.relation}` first (or `--streams {stream.service}`, which lands both "
                "in order)"
            )


def partial_record(
    run_id: str, started_by: str, stream: Stream, started_at: datetime, days: list[date] | None
) -> Callable[[Landed, str | None], RunRecord]:
    """The run's row of `sync.runs`, once it is known what it landed and how it ended."""

    def record(landed: Landed, error: str | None) -> RunRecord:
        failed = "\n".join(landed.failed.values()) or None
        connections = len(landed.rows_per_connection)
        return RunRecord(
            run_id=run_id,
            relation=stream.relation,
            started_by=started_by,
            started_at=started_at,
            ended_at=datetime.now(UTC),
            first_day=days[0] if days else None,
            last_day=days[-1] if days else None,
            rows=landed.rows,
            requests=landed.stats.requests,
            throttled=landed.stats.throttled,
            retries=landed.stats.retries,
            budget_wait_seconds=round(landed.stats.waited, 2),
            outcome="failed" if error else outcome_of(connections, len(landed.failed)),
            error=error or failed,
            connections=connection_outcomes(landed.rows_per_connection, landed.failed),
        )

    return record


def write_record(lake: Lake, row: RunRecord, warn: Log) -> None:
    """Write a run's row of `sync.runs`, then merge the past days' rows into a file a day
    (`merge_history`). A history that cannot be written or merged is said, and the run goes
    on: what it landed is in the lake either way."""
    try:
        record_run(lake, row)
    except (OSError, SyncError) as problem:
        warn(f"{row.relation}: its row of sync.runs was not written: {problem}")
        return
    try:
        merge_history(lake, today())
    except (OSError, pa.ArrowException) as problem:
        # Nothing is lost: the days stay a file per run until a later run merges them.
        warn(f"sync.runs: past days not merged into a file a day: {first_line(problem)}")


def written_by(stream: Stream, days: list[date] | None, started_at: datetime) -> set[Written]:
    """What a landing of `days` (None: a snapshot) may have written, its run's row with it."""
    # The run's row is filed under the day it started; a run across midnight ends the next.
    run_days = {started_at.date(), datetime.now(UTC).date()}
    runs = {(RUNS.relation, day) for day in run_days}
    if days is None or not stream.daily:
        return {(stream.relation, None), *runs}
    return {(stream.relation, day) for day in days} | runs


def refresh_views(location: LakeLocation, written: set[Written], log: Log, warn: Log) -> str:
    """Bring the warehouse up to date after a landing: nothing to do when its views read
    what the landing wrote already (`Warehouse.refresh`); a stream's first file, a new day
    or a closed day landed again rebuild it. A build that cannot be done is said, and the
    landing stands; the next landing or sync builds them. Returns what was done."""
    try:
        outcome = refresh_warehouse(
            location.lake_root, location.warehouse_path, location.warehouse_sql, written
        )
    except SyncError as problem:
        warn(f"warehouse: views not brought up to date: {problem}")
        return f"views not brought up to date: {problem}"
    log(f"warehouse: {outcome}")
    return outcome
