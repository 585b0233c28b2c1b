"""The one factory that makes a stream's Dagster asset from its declaration.

Each pulled stream is declared once, in `pipelines/streams/<service>/` (a `PulledStream`:
its schema, row function and description); a service's module (`assets/comment.py`, ...)
makes an asset of each. Every asset is alike: keyed `<service>/<stream>`, grouped by
service, in its service's pool, daily-partitioned with single-run backfills when its stream
is, reporting what the landing returned as metadata (a daily stream's on each day's own
materialization), tagged with its service and described for the catalog by its columns
(`assets/catalog.py`) and its rows. Days older than the service serves are not asked for and
say so: a "materialize all" never leaves a partition that could never turn green. A
connection that fails does not stop the others: what they landed is recorded, then the step
fails naming each failed connection and what to do.
"""

# No `from __future__ import annotations`: Dagster reads the context's annotation.
import os
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta

import dagster as dg

from assets.catalog import row_count, stream_metadata
from assets.health import HEALTH, connection_health
from assets.partitions import partitions_of, single_run
from assets.tags import (
    AUTOMATION_CONDITION_TAG,
    BACKFILL_ID_TAG,
    SCHEDULE_NAME_TAG,
    SENSOR_NAME_TAG,
)
from assets.told import told
from pipelines.catalog import refresh_warehouse
from pipelines.damaged import set_aside_damaged
from pipelines.errors import SetupError, SyncError, first_line
from pipelines.lake import Lake
from pipelines.landed import Landed
from pipelines.landing import Pull, PulledStream, land, served_days, today
from pipelines.object_store import lake_fault
from pipelines.run_history import RUNS, RunRecord, connection_outcomes, outcome_of, record_run
from pipelines.stream import Stream
from pipelines.warehouse import Written

KINDS = frozenset({"python", "parquet"})
#: How late a stream may be before Dagster's freshness says so: an hourly one two hours
#: (a run missed and the next late), a daily one a day and two hours.
FRESHNESS = {
    True: dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=2)),
    False: dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=26)),
}
#: Who the catalog says owns the assets (`ASSET_OWNERS`: emails or `team:<name>`, comma
#: separated), so a team can filter by its own.
OWNERS_VARIABLE = "ASSET_OWNERS"
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
DEFAULT_OWNERS = ("team:data",)
#: The tag a run carries that says what started it, where Dagster's own tags do not
#: (the command line sets it: `assets/sync.py`).
STARTED_BY_TAG = "sync/started_by"
#: The tag of a run whose starter brings the views up to date once its runs end, instead of
#: each step after its landing: the command line's sync (`assets/sync.py`), so a sync of
#: every stream builds the warehouse once, not once per stream.
VIEWS_TAG = "sync/views"
VIEWS_AT_END = "when the sync ends"


def pool(service: str) -> str:
    """The Dagster pool of a service's steps. It caps how many call the service at once;
    the keys' budgets are kept by the shared budget store, not by the pool (docs/dagster.md)."""
    return f"{service}_api"


def service_tag(service: str, direction: str = "pull") -> dict[str, str]:
    """The tags the catalog filters by: the service, and whether its data is pulled from it or
    pushed to it (kinds say what an asset is made of)."""
    return {"service": service, "direction": direction}


def owners(env: Mapping[str, str] | None = None) -> list[str]:
    """`ASSET_OWNERS`, checked: Dagster takes an email or `team:<name>`."""
    env = os.environ if env is None else env
    named = [o.strip() for o in env.get(OWNERS_VARIABLE, "").split(",") if o.strip()]
    wrong = [o for o in named if not (o.startswith("team:") or EMAIL.fullmatch(o))]
    if wrong:
        raise SetupError(
            f"{OWNERS_VARIABLE} names {wrong}: give emails or `team:<name>`, comma separated"
        )
    return named or list(DEFAULT_OWNERS)


def asset_key(stream: Stream) -> dg.AssetKey:
    return dg.AssetKey([stream.service, stream.name])


def partition_days(context: dg.AssetExecutionContext) -> list[date]:
    """The days of the run's partition range, oldest first (one pass for a whole backfill)."""
    window = context.partition_time_window
    first, end = window.start.date(), window.end.date()
    return [first + timedelta(days=n) for n in range((end - first).days)]


def stream_assets(streams: list[PulledStream]) -> dict[str, dg.AssetsDefinition]:
    """The assets of a service's streams, by stream name."""
    return {stream.name: stream_asset(stream) for stream in streams}


def stream_asset(stream: PulledStream) -> dg.AssetsDefinition:
    """The asset of one declared stream; its service's resource is named like the service."""
    partitioned = stream.partitioned

    @dg.asset(
        key=asset_key(stream),
        group_name=stream.service,
        kinds=set(KINDS | stream.formats),
        pool=pool(stream.service),
        deps=[dg.AssetKey([stream.service, name]) for name in stream.upstream],
        description=stream.description,
        metadata=stream_metadata(stream),
        tags=service_tag(stream.service),
        owners=owners(),
        freshness_policy=FRESHNESS[stream.hourly],
        partitions_def=partitions_of(stream),
        backfill_policy=single_run if partitioned else None,
        required_resource_keys={"lake", stream.service},
    )
    @told
    def landed_stream(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        started_at = datetime.now(UTC)
        lake = context.resources.lake.lake()
        days = partition_days(context) if partitioned else None
        # The run's own days only, each page read (a day may be merged with what it holds):
        # the sync sets aside the rest before choosing its range, and the check
        # `files_readable` names them meanwhile.
        own_days = set(days) if days is not None and stream.daily else None
        try:
            damaged = set_aside_damaged(lake, stream, own_days, pages=True)
        except OSError as error:  # the lake's disk or store, before anything was pulled
            fault = lake_fault(error, context.resources.lake.lake_root)
            if fault is None:
                raise
            raise fault from None
        for found in damaged:
            context.log.warning(f"{stream.relation}: damaged file set aside, landed again: {found}")
        served, not_served = served_days(stream, days or [], today())
        if not_served:
            context.log.warning(
                f"{stream.relation}: {len(not_served)} day(s) from {not_served[0]} to "
                f"{not_served[-1]} are older than the service serves ({stream.served_days} "
                "days): not asked for; what the lake landed of them before stays."
            )
        pull = Pull(
            service=getattr(context.resources, stream.service),
            lake=lake,
            stream=stream,
            log=context.log.info,
            warn=context.log.warning,
            days=served if partitioned else None,
        )
        try:
            landed = land(pull) if served or not partitioned else Landed()
        except Exception as error:
            record(context, lake, stream, started_at, days, Landed(), first_line(error))
            raise
        if damaged:
            landed.figures["damaged_set_aside"] = [str(found) for found in damaged]
        if landed.drift:
            context.log.warning(
                f"{stream.relation}: the service sent what its declared schema does not hold "
                f"({landed.drift.summary()}); contract {pull.service.contract(stream.name)}: "
                "see `_extra` and the check schema_matches"
            )
        record(context, lake, stream, started_at, days, landed)
        refresh_views(context, written_by(stream, days, started_at))
        health = {HEALTH: connection_health(context, landed)}
        if landed.failed:
            fail_connections(context, stream, landed, lake, days, health)
        if not partitioned:
            # Each connection's snapshot replaced whole: the rows landed are the table's.
            metadata = landed.metadata(None) | row_count(landed.rows, partition=False) | health
            return dg.MaterializeResult(metadata=metadata)
        # A range run records each day's own figures on that day's materialization, and
        # the run's own (requests, the range, the connections' health) once, as an
        # observation of the asset.
        landed.not_served = not_served
        context.log_event(
            dg.AssetObservation(
                asset_key=context.asset_key, metadata=landed.metadata(days) | health
            )
        )
        for day, figures in landed.day_metadata(lake, stream, days).items():
            figures |= row_count(figures["rows"], partition=True)
            context.add_asset_metadata(figures, partition_key=day.isoformat())
        return dg.MaterializeResult()

    return landed_stream


def record(
    context: dg.AssetExecutionContext,
    lake: Lake,
    stream: Stream,
    started_at: datetime,
    days: list[date] | None,
    landed: Landed,
    error: str | None = None,
) -> None:
    """The run's row of `sync.runs` (`pipelines/run_history.py`). A history that cannot be
    written is said, and the run goes on: what it landed is in the lake either way."""
    failed = "\n".join(landed.failed.values()) or None
    outcome = "failed" if error else outcome_of(len(landed.rows_per_connection), len(landed.failed))
    row = RunRecord(
        run_id=context.run.run_id,
        relation=stream.relation,
        started_by=started_by(context.run.tags),
        started_at=started_at,
        ended_at=datetime.now(UTC),
        first_day=days[0] if days else None,
        last_day=days[-1] if days else None,
        rows=landed.rows,
        requests=landed.stats.requests,
        throttled=landed.stats.throttled,
        retries=landed.stats.retries,
        budget_wait_seconds=round(landed.stats.waited, 2),
        outcome=outcome,
        error=error or failed,
        connections=connection_outcomes(landed.rows_per_connection, landed.failed),
    )
    try:
        record_run(lake, row)
    except (OSError, SyncError) as problem:
        context.log.warning(f"{stream.relation}: its row of sync.runs was not written: {problem}")


def started_by(tags: Mapping[str, str]) -> str:
    """What launched a run, from the tags Dagster (and the command line) give it."""
    if SCHEDULE_NAME_TAG in tags:
        return f"schedule {tags[SCHEDULE_NAME_TAG]}"
    if SENSOR_NAME_TAG in tags:
        return f"sensor {tags[SENSOR_NAME_TAG]}"
    if BACKFILL_ID_TAG in tags:
        return f"backfill {tags[BACKFILL_ID_TAG]}"
    if AUTOMATION_CONDITION_TAG in tags:
        return "automation"
    return tags.get(STARTED_BY_TAG, "UI or API")


def written_by(stream: Stream, days: list[date] | None, started_at: datetime) -> set[Written]:
    """What a landing of `days` (None: a snapshot) may have written, its run's row with it."""
    # The run's row is filed under the day it started; a run across midnight ends the next.
    run_days = {started_at.date(), datetime.now(UTC).date()}
    runs = {(RUNS.relation, day) for day in run_days}
    if days is None or not stream.daily:
        return {(stream.relation, None), *runs}
    return {(stream.relation, day) for day in days} | runs


def refresh_views(context: dg.AssetExecutionContext, written: set[Written]) -> str:
    """Bring the warehouse up to date after a landing, whatever started it: nothing to do
    when its views read what the landing wrote already (`Warehouse.refresh`); a stream's
    first file, a new day or a closed day landed again rebuild it. A run tagged `VIEWS_TAG`
    leaves it to its starter. A build that cannot be done is said, and the landing stands;
    the views asset, the next landing or the next sync build them. Returns what was done."""
    if context.run.tags.get(VIEWS_TAG) == VIEWS_AT_END:
        outcome = f"views brought up to date {VIEWS_AT_END}"
        context.log.info(f"warehouse: {outcome}")
        return outcome
    lake = context.resources.lake
    try:
        outcome = refresh_warehouse(
            lake.lake_root, lake.warehouse_path, lake.warehouse_sql, written
        )
    except SyncError as problem:
        context.log.warning(f"warehouse: views not brought up to date: {problem}")
        return f"views not brought up to date: {problem}"
    context.log.info(f"warehouse: {outcome}")
    return outcome


def fail_connections(
    context: dg.AssetExecutionContext,
    stream: Stream,
    landed: Landed,
    lake: Lake,
    days: list[date] | None,
    health: dict,
) -> None:
    """Fail the step for the connections that failed, after recording what the others
    landed (a materialization per day for a daily stream) and the connections' health, so
    the UI shows both. Recorded on the instance at once: what a step logs is lost when the
    step then fails."""
    events: list[dg.AssetMaterialization | dg.AssetObservation] = [
        dg.AssetObservation(asset_key=context.asset_key, metadata=health)
    ]
    if landed.rows_per_connection:
        if days is None:
            events.append(
                dg.AssetMaterialization(context.asset_key, metadata=landed.metadata(None))
            )
        else:
            events += [
                dg.AssetMaterialization(context.asset_key, partition=day.isoformat(), metadata=m)
                for day, m in landed.day_metadata(lake, stream, days).items()
            ]
    for event in events:
        context.instance.report_runless_asset_event(event)
    failed = "\n".join(f"- {reason}" for reason in landed.failed.values())
    landed_too = ", ".join(landed.rows_per_connection) or "none"
    raise dg.Failure(
        description=(
            f"{stream.relation}: {len(landed.failed)} connection(s) failed (the others "
            f"landed: {landed_too}):\n{failed}"
        ),
        metadata=landed.metadata(days),
    )
