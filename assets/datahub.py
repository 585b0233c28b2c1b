"""Customer data hub assets, both regions: custom fields, broadcasts, a daily snapshot of each
broadcast's report, and members through the hub's export task.

What each stream's rows are, and what the checks compare, is in `pipelines/streams/datahub/`;
this module runs them as Dagster assets and checks and reports their figures."""

from functools import partial

import dagster as dg

from assets.checks import STREAM_CHECKS, nothing_compared
from assets.factory import StreamAsset, asset_key, stream_asset
from assets.resources import LakeResource
from pipelines.streams.datahub import (
    BROADCAST_REPORTS,
    BROADCASTS,
    CUSTOM_FIELDS,
    MEMBERS,
    STREAMS,
)
from pipelines.streams.datahub.checks import export_row_counts, report_coverage
from pipelines.streams.datahub.export import land_members
from pipelines.streams.datahub.reports import report_rows_by_day
from pipelines.streams.datahub.snapshots import broadcast_rows, custom_field_rows

PULLED = [
    StreamAsset(
        CUSTOM_FIELDS,
        lambda pull: pull.snapshot(partial(custom_field_rows, pull.service)),
        "Custom field definitions, archived ones included, with their options.",
    ),
    StreamAsset(
        BROADCASTS,
        lambda pull: pull.snapshot(partial(broadcast_rows, pull.service)),
        "Broadcasts, sent and scheduled.",
    ),
    StreamAsset(
        BROADCAST_REPORTS,
        lambda pull: pull.daily(partial(report_rows_by_day, pull.service, pull.lake)),
        "Day D: each broadcast's figures as of D, for the broadcasts whose figures can still "
        "change (sent within 60 days, or scheduled) and those not yet in the lake.",
        deps=(BROADCASTS,),
    ),
    StreamAsset(
        MEMBERS,
        land_members,
        "Member profiles through the export task (a CSV file streamed in batches), one "
        "export per connection and day, kept as the profiles' history.",
        kinds=frozenset({"csv"}),
        # A file a day, but each run exports today's: there is no older day to ask for.
        partitioned=False,
    ),
]
ASSETS = [stream_asset(declared) for declared in PULLED]
custom_fields, broadcasts, broadcast_reports, members = ASSETS


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
    description=(
        "Every broadcast of the `broadcasts` snapshot has a report once reports were pulled "
        "after it, and no report pulled before it is of a broadcast it does not list: each "
        "side compared only with what existed when the other was pulled (`pulled_at`)."
    ),
)
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
    *(check(stream, asset_key(stream)) for stream in STREAMS for check in STREAM_CHECKS),
    members_equal_export_row_count,
    one_report_per_broadcast,
]
