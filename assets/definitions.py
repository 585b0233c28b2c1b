"""The Dagster code location: every service's assets and checks merged, the warehouse views,
jobs per service, hourly and daily schedules; freshness is each asset's policy (docs/dagster.md)."""

from datetime import UTC, timedelta

import dagster as dg
import pyarrow as pa

from assets import (
    activities,
    agent,
    alerts,
    comment,
    conversation,
    datahub,
    push,
    setup_check,
    webhooks,
)
from assets.catalog import column_schema
from assets.checks import WHOLE_STREAM_JOB
from assets.console import LOGGERS
from assets.executors import executor
from assets.factory import owners, service_tag
from assets.failures import tells_errors
from assets.resources import LakeResource, resources_or_problem
from assets.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pipelines import process
from pipelines.errors import SyncError
from pipelines.registry import PULLED
from pipelines.stream import described
from pipelines.stream_run import days_to_sync
from pipelines.warehouse.relations import refresh_warehouse

# Loading the code location is where each Dagster process starts (webserver, daemon, run
# and step workers).
process.prepare()

SERVICES = {"comment": comment, "conversation": conversation, "datahub": datahub}
STREAMS = PULLED
STREAM_ASSETS = [asset for module in SERVICES.values() for asset in module.ASSETS.values()]


#: What the views asset is, as a table: the relations the warehouse defines (README.md,
#: "Query the warehouse"); each stream's own columns are on its asset.
VIEWS_SCHEMA = pa.schema(
    [
        described(
            "schema",
            pa.string(),
            "A service, `marts`, `outbound` or `sync`, or a schema of a `WAREHOUSE_SQL` folder.",
        ),
        described("view", pa.string(), "Defined by the file `<schema>/<view>.sql` of its folder."),
    ]
)


@dg.asset(
    key=["warehouse", "views"],
    group_name="warehouse",
    kinds={"duckdb"},
    metadata={"dagster/column_schema": column_schema(VIEWS_SCHEMA)},
    tags=service_tag("warehouse"),
    owners=owners(),
    deps=STREAM_ASSETS,
    description=(
        "`warehouse.duckdb`: a view per stream and the marts, from `sql/` and the folders "
        "`WAREHOUSE_SQL` lists. Rebuilt beside the file and renamed over it when a definition "
        "changes, so open sessions do not stop it; fails, saying what to do, only if a "
        "read-write session has unsaved changes in the file."
    ),
)
@tells_errors
def warehouse_views(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    outcome = refresh_warehouse(lake.lake_root, lake.warehouse_path, lake.warehouse_sql)
    context.log.info(f"warehouse: {outcome}")
    return dg.MaterializeResult(metadata={"warehouse": outcome})


def _keys(module, partitioned: bool) -> list[dg.AssetKey]:
    return [a.key for a in module.ASSETS.values() if (a.partitions_def is not None) == partitioned]


def _jobs() -> dict:
    jobs = []
    for service, module in SERVICES.items():
        jobs.append(
            dg.define_asset_job(
                f"{service}_dimensions",
                selection=dg.AssetSelection.assets(*_keys(module, partitioned=False)),
                description=f"Snapshot streams of {service}.",
            )
        )
        jobs.append(
            dg.define_asset_job(
                f"{service}_daily",
                selection=dg.AssetSelection.assets(*_keys(module, partitioned=True)),
                description=f"Day-partitioned streams of {service}; a range is one run.",
            )
        )
    jobs.append(
        dg.define_asset_job(
            "all_dimensions",
            selection=dg.AssetSelection.assets(
                *(k for m in SERVICES.values() for k in _keys(m, partitioned=False)),
                warehouse_views.key,
            ),
            description="Every snapshot stream of every service, then the warehouse views.",
        )
    )
    jobs.append(
        dg.define_asset_job(
            WHOLE_STREAM_JOB,
            selection=dg.AssetSelection.checks_for_assets(*STREAM_ASSETS),
            description=(
                "Every check of every pulled stream over the whole stream, materializing "
                "nothing: a key repeated across days, a page damaged in a day no run lands "
                "again. A landing's own checks look at its days only."
            ),
        )
    )
    jobs.append(
        dg.define_asset_job(
            "all_daily",
            selection=dg.AssetSelection.assets(
                *(k for m in SERVICES.values() for k in _keys(m, partitioned=True))
            ),
            description="Every day-partitioned stream of every service.",
        )
    )
    return {job.name: job for job in jobs}


JOBS = _jobs()


#: Minutes past the hour each service's day-partitioned streams are pulled at: every hour
#: where they are declared `hourly`, else once a day at that minute past 23:00 (UTC), late
#: in the day.
MINUTE_PAST = {"comment": 5, "conversation": 10, "datahub": 30}


def _days_schedule(service: str) -> dg.ScheduleDefinition:
    """The run of a service's day-partitioned streams (its `<service>_daily` job), every hour
    where the declarations say `hourly`, else daily, for the days the one day policy gives
    (`pipelines/stream_run.days_to_sync`): yesterday and today, from further back where the
    lake misses a day the service still serves. The days are the tick's own, so a tick
    evaluated late (the daemon was down) still pulls its own days."""
    job_name = f"{service}_daily"
    streams = [s for s in PULLED if s.service == service and s.partitioned]
    cadence = {s.hourly for s in streams}
    if len(cadence) > 1:
        raise ValueError(
            f"{service}: its day-partitioned streams are one job; declare all or none `hourly`"
        )
    hourly = cadence.pop()
    minute = MINUTE_PAST[service]

    @dg.schedule(
        name=f"{job_name}_hourly" if hourly else f"{job_name}_schedule",
        cron_schedule=f"{minute} * * * *" if hourly else f"{minute} 23 * * *",
        job_name=job_name,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        required_resource_keys={"lake", service},
    )
    def recent_days(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        on = context.scheduled_execution_time.astimezone(UTC).date()
        connections = [c.name for c in getattr(context.resources, service).connections]
        try:
            lake = context.resources.lake.lake()
            first = min(days_to_sync(s, lake, connections, on)[0] for s in streams)
        except (SyncError, dg.Failure, OSError) as problem:
            # The run fails on the same problem, saying what to do; the tick still asks for
            # the days that can change.
            context.log.warning(f"{job_name}: the lake's days not read ({problem})")
            first = on - timedelta(days=1)
        return dg.RunRequest(
            run_key=context.scheduled_execution_time.isoformat(),
            tags={
                ASSET_PARTITION_RANGE_START_TAG: first.isoformat(),
                ASSET_PARTITION_RANGE_END_TAG: on.isoformat(),
            },
        )

    return recent_days


def _schedules() -> list[dg.ScheduleDefinition]:
    """Regular operation: on as soon as the daemon runs (`dagster dev` starts one)."""
    return [
        *(
            _days_schedule(service)
            for service in SERVICES
            if any(s.service == service and s.partitioned for s in PULLED)
        ),
        dg.ScheduleDefinition(
            name=f"{WHOLE_STREAM_JOB}_daily",
            cron_schedule="45 3 * * *",
            job_name=WHOLE_STREAM_JOB,
            execution_timezone="UTC",
            default_status=dg.DefaultScheduleStatus.RUNNING,
        ),
        dg.ScheduleDefinition(
            name="all_dimensions_daily",
            cron_schedule="30 2 * * *",
            job_name="all_dimensions",
            execution_timezone="UTC",
            default_status=dg.DefaultScheduleStatus.RUNNING,
        ),
    ]


EXECUTOR = executor()

defs = dg.Definitions(
    assets=[*STREAM_ASSETS, warehouse_views, *webhooks.ASSETS, *agent.ASSETS, *push.ASSETS],
    asset_checks=[check for module in SERVICES.values() for check in module.CHECKS],
    jobs=[
        *JOBS.values(),
        *push.JOBS,
        *activities.JOBS,
        *webhooks.JOBS,
        *agent.JOBS,
        *setup_check.JOBS,
    ],
    schedules=_schedules(),
    sensors=[
        *webhooks.SENSORS,
        *agent.SENSORS,
        *alerts.SENSORS,
    ],
    resources=resources_or_problem(),
    loggers=LOGGERS,
    executor=EXECUTOR,
)
