"""Customer data hub assets, both regions: custom fields, broadcasts, a daily snapshot of each
broadcast's report, and members through the hub's export task.

What each stream's rows are, and what the checks compare, is in `pipelines/streams/datahub/`;
this module runs them as Dagster assets and checks and reports their figures."""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations.
from functools import partial

import dagster as dg

from assets.checks import unique_ids_check
from assets.landing import land_days, land_snapshot, partition_days
from assets.partitions import daily, single_run
from assets.resources import DataHubResource, LakeResource
from pipelines.clients.datahub import DataHub
from pipelines.lake import Stream
from pipelines.streams.datahub import (
    BROADCAST_REPORTS,
    BROADCASTS,
    CUSTOM_FIELDS,
    MEMBERS,
    SERVICE,
    STREAMS,
)
from pipelines.streams.datahub.checks import export_row_counts, report_coverage
from pipelines.streams.datahub.export import land_member_exports
from pipelines.streams.datahub.reports import report_rows_by_day
from pipelines.streams.datahub.snapshots import broadcast_rows, custom_field_rows
from pipelines.transport import CallStats

#: The value of `DataHub.pool()`: one concurrency pool per service key.
POOL = f"{DataHub.service}_api"
KINDS = {"python", "parquet"}


def asset_key(stream: Stream) -> dg.AssetKey:
    return dg.AssetKey([stream.service, stream.name])


@dg.asset(
    key=asset_key(CUSTOM_FIELDS),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    description="Custom field definitions, archived ones included, with their options.",
)
def custom_fields(
    context: dg.AssetExecutionContext, lake: LakeResource, datahub: DataHubResource
) -> dg.MaterializeResult:
    return land_snapshot(
        context, datahub, lake.lake(), CUSTOM_FIELDS, partial(custom_field_rows, datahub)
    )


@dg.asset(
    key=asset_key(BROADCASTS),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    description="Broadcasts, sent and scheduled.",
)
def broadcasts(
    context: dg.AssetExecutionContext, lake: LakeResource, datahub: DataHubResource
) -> dg.MaterializeResult:
    return land_snapshot(
        context, datahub, lake.lake(), BROADCASTS, partial(broadcast_rows, datahub)
    )


@dg.asset(
    key=asset_key(BROADCAST_REPORTS),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    partitions_def=daily,
    backfill_policy=single_run,
    deps=[asset_key(BROADCASTS)],
    description=(
        "Day D: each broadcast's figures as of D, for the broadcasts whose figures can still "
        "change (sent within 60 days, or scheduled) and those not yet in the lake."
    ),
)
def broadcast_reports(
    context: dg.AssetExecutionContext, lake: LakeResource, datahub: DataHubResource
) -> dg.MaterializeResult:
    the_lake = lake.lake()
    return land_days(
        context,
        datahub,
        the_lake,
        BROADCAST_REPORTS,
        partition_days(context),
        partial(report_rows_by_day, datahub, the_lake),
    )


@dg.asset(
    key=asset_key(MEMBERS),
    group_name=SERVICE,
    kinds=KINDS | {"csv"},
    pool=POOL,
    description=(
        "Member profiles through the export task (a CSV file streamed in batches), one "
        "export per connection and day, kept as the profiles' history."
    ),
)
def members(
    context: dg.AssetExecutionContext, lake: LakeResource, datahub: DataHubResource
) -> dg.MaterializeResult:
    stats = CallStats()
    counts = land_member_exports(datahub, lake.lake(), stats, context.log.info)
    return dg.MaterializeResult(
        metadata={
            "rows": sum(counts.values()),
            "rows_per_connection": counts,
            **stats.as_metadata(),
        }
    )


@dg.asset_check(asset=asset_key(MEMBERS), name="rows_equal_export_row_count", blocking=False)
def members_equal_export_row_count(lake: LakeResource) -> dg.AssetCheckResult:
    """Each connection's latest export holds the rows its task announced."""
    counts = export_row_counts(lake.lake())
    return dg.AssetCheckResult(
        passed=counts.passed,
        metadata={"rows_landed": counts.landed, "export_row_count": counts.announced},
    )


@dg.asset_check(asset=asset_key(BROADCAST_REPORTS), name="one_report_per_broadcast", blocking=False)
def one_report_per_broadcast(lake: LakeResource) -> dg.AssetCheckResult:
    """Every broadcast of the `broadcasts` snapshot has a report, and no report is of another."""
    coverage = report_coverage(lake.lake())
    return dg.AssetCheckResult(
        passed=coverage.passed,
        metadata={
            "broadcasts_without_report": coverage.missing,
            "reports_of_unknown_broadcasts": coverage.unknown,
        },
    )


ASSETS = [custom_fields, broadcasts, broadcast_reports, members]
CHECKS = [
    *(unique_ids_check(stream, asset_key(stream)) for stream in STREAMS),
    members_equal_export_row_count,
    one_report_per_broadcast,
]
