"""Customer data hub assets, both regions: custom fields, broadcasts, a daily snapshot of each
broadcast's report, and members through the hub's export task.

What each stream's rows are, and what the checks compare, is in `pipelines/streams/datahub/`;
this module runs them as Dagster assets and checks and reports their figures."""

import dagster as dg

from assets.checks import result_of, stream_check, stream_checks
from assets.factory import stream_assets
from assets.resources import LakeResource
from pipelines.streams.datahub import BROADCAST_REPORTS, MEMBERS, STREAMS
from pipelines.streams.datahub.checks import export_row_counts, report_coverage

ASSETS = stream_assets(STREAMS)


@stream_check(
    MEMBERS,
    "rows_equal_export_row_count",
    "Each connection's latest members file holds the rows its export task announced "
    "(`row_count`, kept in the file's metadata).",
)
def members_equal_export_row_count(lake: LakeResource) -> dg.AssetCheckResult:
    counts = export_row_counts(lake.lake())
    return result_of(counts, counts.figures)


@stream_check(
    BROADCAST_REPORTS,
    "one_report_per_broadcast",
    "Every broadcast of the `broadcasts` snapshot has a report once reports were pulled after "
    "it, and no report pulled before it is of a broadcast it does not list: each side "
    "compared only with what existed when the other was pulled (`pulled_at`).",
)
def one_report_per_broadcast(lake: LakeResource) -> dg.AssetCheckResult:
    coverage = report_coverage(lake.lake())
    return result_of(coverage, coverage.figures)


CHECKS = [
    *stream_checks(STREAMS),
    members_equal_export_row_count,
    one_report_per_broadcast,
]
