"""Customer data hub assets, both regions: custom fields, broadcasts, a daily snapshot of each
broadcast's report, and members through the hub's export task.

What each stream's rows are, and what the checks compare, is in `pipelines/streams/datahub/`;
this module runs them as Dagster assets and checks and reports their figures."""

import dagster as dg

from assets.checks import by_day, nothing_compared, stream_checks
from assets.factory import asset_key, stream_assets
from assets.partitions import partitions_of
from assets.resources import LakeResource
from pipelines.streams.datahub import BROADCAST_REPORTS, MEMBERS, STREAMS
from pipelines.streams.datahub.checks import export_row_counts, report_coverage

ASSETS = stream_assets(STREAMS)


@dg.asset_check(
    asset=asset_key(MEMBERS),
    name="rows_equal_export_row_count",
    blocking=False,
    description=(
        "Each connection's latest members file holds the rows its export task announced "
        "(`row_count`, kept in the file's metadata)."
    ),
)
def members_equal_export_row_count(lake: LakeResource) -> dg.AssetCheckResult:
    counts = export_row_counts(lake.lake())
    metadata = {
        "rows_landed": counts.landed,
        "export_row_count": counts.announced,
        "files_without_row_count": counts.not_announced,
    }
    if not counts.landed:
        reason = "members not landed" if not counts.not_announced else "no file says its count"
        return nothing_compared(reason, metadata)
    return dg.AssetCheckResult(passed=counts.passed, metadata=metadata)


@dg.asset_check(
    asset=asset_key(BROADCAST_REPORTS),
    name="one_report_per_broadcast",
    blocking=False,
    partitions_def=partitions_of(BROADCAST_REPORTS),
    description=(
        "Every broadcast of the `broadcasts` snapshot has a report once reports were pulled "
        "after it, and no report pulled before it is of a broadcast it does not list: each "
        "side compared only with what existed when the other was pulled (`pulled_at`)."
    ),
)
@by_day
def one_report_per_broadcast(lake: LakeResource) -> dg.AssetCheckResult:
    coverage = report_coverage(lake.lake())
    metadata = {
        "broadcasts_without_report": coverage.missing,
        "reports_of_unknown_broadcasts": coverage.unknown,
        "not_compared": coverage.not_compared,
    }
    if not coverage.compared:
        reasons = sorted({r for found in coverage.not_compared.values() for r in found})
        return nothing_compared("; ".join(reasons) or "no broadcasts landed", metadata)
    return dg.AssetCheckResult(passed=coverage.passed, metadata=metadata)


CHECKS = [
    *stream_checks(STREAMS),
    members_equal_export_row_count,
    one_report_per_broadcast,
]
