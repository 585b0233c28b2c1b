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
from datetime import date, timedelta

import dagster as dg

from assets.catalog import row_count, stream_metadata
from assets.failures import tells_errors
from assets.health import HEALTH, connection_health
from assets.partitions import partitions_of, single_run
from assets.tags import (
    AUTOMATION_CONDITION_TAG,
    BACKFILL_ID_TAG,
    SCHEDULE_NAME_TAG,
    SENSOR_NAME_TAG,
)
from pipelines.errors import SetupError
from pipelines.pull.landing import PulledStream
from pipelines.stream import Stream
from pipelines.stream_run import VIEWS_LEFT, StreamRun, refresh_views, run_stream
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
    @tells_errors
    def landed_stream(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        run = run_stream(
            stream,
            getattr(context.resources, stream.service),
            context.resources.lake,
            partition_days(context) if partitioned else None,
            run_id=context.run.run_id,
            started_by=started_by(context.run.tags),
            log=context.log.info,
            warn=context.log.warning,
            build_views=context.run.tags.get(VIEWS_TAG) != VIEWS_AT_END,
        )
        landed, days = run.landed, run.days
        health = {HEALTH: connection_health(context, landed)}
        if landed.failed:
            fail_connections(context, run, health)
        if not partitioned:
            # Each connection's snapshot replaced whole: the rows landed are the table's.
            metadata = landed.metadata(None) | row_count(landed.rows, partition=False) | health
            return dg.MaterializeResult(metadata=metadata)
        # A range run records each day's own figures on that day's materialization, and
        # the run's own (requests, the range, the connections' health) once, as an
        # observation of the asset.
        context.log_event(
            dg.AssetObservation(
                asset_key=context.asset_key, metadata=landed.metadata(days) | health
            )
        )
        for day, figures in landed.day_metadata(run.lake, stream, days).items():
            figures |= row_count(figures["rows"], partition=True)
            context.add_asset_metadata(figures, partition_key=day.isoformat())
        return dg.MaterializeResult()

    return landed_stream


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


def views_after(context: dg.OpExecutionContext, written: set[Written]) -> str:
    """The views brought up to date after a step wrote `written` to the lake
    (`pipelines/stream_run.py`), unless the run is tagged `VIEWS_TAG`: its starter builds
    them once after its runs."""
    if context.run.tags.get(VIEWS_TAG) == VIEWS_AT_END:
        context.log.info(f"warehouse: {VIEWS_LEFT}")
        return VIEWS_LEFT
    lake = context.resources.lake
    return refresh_views(lake, written, context.log.info, context.log.warning)


def fail_connections(context: dg.AssetExecutionContext, run: StreamRun, health: dict) -> None:
    """Fail the step for the connections that failed, after recording what the others
    landed (a materialization per day for a daily stream) and the connections' health, so
    the UI shows both. Recorded on the instance at once: what a step logs is lost when the
    step then fails."""
    landed, days = run.landed, run.days
    events: list[dg.AssetMaterialization | dg.AssetObservation] = [
        dg.AssetObservation(asset_key=context.asset_key, metadata=health)
    ]
    if landed.rows_per_connection:
        if days is None:
            # The health beside the figures, as a landing without failure records them: the
            # asset's newest materialization shows the failing connection.
            metadata = landed.metadata(None) | health
            events.append(dg.AssetMaterialization(context.asset_key, metadata=metadata))
        else:
            events += [
                dg.AssetMaterialization(context.asset_key, partition=day.isoformat(), metadata=m)
                for day, m in landed.day_metadata(run.lake, run.stream, days).items()
            ]
    for event in events:
        context.instance.report_runless_asset_event(event)
    raise dg.Failure(description=run.failure(), metadata=landed.metadata(days))
