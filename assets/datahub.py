"""Customer data hub assets, both regions: custom fields, broadcasts, a daily snapshot of each
broadcast's report, and members through the export task (customer-data-hub-api.md)."""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations.
import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import date, timedelta

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from assets.checks import unique_ids_check
from assets.landing import (
    land_days,
    land_snapshot,
    partition_days,
)
from assets.partitions import daily, single_run, today
from assets.resources import DataHubResource, LakeResource
from pipelines.clients.base import Connection
from pipelines.clients.datahub import (
    REPORT_MAX_DAYS,
    Broadcast,
    BroadcastReport,
    DataHub,
    DataHubClient,
    ExportResult,
)
from pipelines.lake import Lake, Stream, read_columns
from pipelines.landing import pulled_at
from pipelines.streams.datahub import (
    BROADCAST_REPORTS,
    BROADCASTS,
    CUSTOM_FIELD_OPTION,
    CUSTOM_FIELDS,
    MEMBER_TEXT_COLUMNS,
    MEMBERS,
    SERVICE,
    STREAMS,
)
from pipelines.transport import CallStats, Transport, TruncatedBody

#: The value of `DataHub.pool()`: one concurrency pool per service key.
POOL = f"{DataHub.service}_api"
KINDS = {"python", "parquet"}


def asset_key(stream: Stream) -> dg.AssetKey:
    return dg.AssetKey([stream.service, stream.name])


# -- custom_fields ------------------------------------------------------------------------


def custom_field_rows(client: DataHubClient) -> Iterator[dict]:
    # `active` unset lists archived fields too (spec section 4: null = all).
    for field in client.list_custom_fields(active=None):
        row = field.model_dump(include=set(CUSTOM_FIELDS.schema.names))
        if field.options is not None:
            option_names = {option.name for option in CUSTOM_FIELD_OPTION}
            row["options"] = [option.model_dump(include=option_names) for option in field.options]
        yield row


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
        context,
        datahub,
        lake.lake(),
        CUSTOM_FIELDS,
        lambda transport, _: custom_field_rows(datahub.client(transport)),
    )


# -- broadcasts ---------------------------------------------------------------------------


def broadcast_rows(client: DataHubClient) -> Iterator[dict]:
    for broadcast in client.list_broadcasts():
        yield broadcast.model_dump(include=set(BROADCASTS.schema.names))


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
        context,
        datahub,
        lake.lake(),
        BROADCASTS,
        lambda transport, _: broadcast_rows(datahub.client(transport)),
    )


# -- broadcast_reports --------------------------------------------------------------------


def report_window(broadcast: Broadcast, day: date, has_snapshot: bool) -> tuple[date, date] | None:
    """The date range of `broadcast`'s report in `day`'s snapshot, or None to keep its last one.

    From the sent day, cut to the 60-day limit (spec section 8); figures change only inside
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
    row = report.model_dump(include=set(BROADCAST_REPORTS.schema.names))
    row.update(
        broadcast_id=broadcast_id,
        start_date=window[0],
        end_date=window[1],
        report=json.dumps(report.model_extra or {}, sort_keys=True, default=str),
    )
    return row


def reported_broadcasts(lake: Lake, connection: str, except_days: Iterable[date]) -> set[int]:
    """Broadcasts with a snapshot in the lake outside `except_days` (the days being
    rewritten, whose snapshots are about to be replaced)."""
    skip = set(except_days)
    files = [
        str(lake.path(BROADCAST_REPORTS, connection, day))
        for day in lake.days(BROADCAST_REPORTS, connection)
        if day not in skip
    ]
    if not files:
        return set()
    return set(read_columns(files, ["broadcast_id"])["broadcast_id"].to_pylist())


def report_rows_by_day(
    lake: Lake, datahub: DataHubResource
) -> Callable[[Transport, Connection, list[date]], Iterator[tuple[date, list[dict]]]]:
    def rows_by_day(
        transport: Transport, connection: Connection, days: list[date]
    ) -> Iterator[tuple[date, list[dict]]]:
        client = datahub.client(transport)
        listed = client.list_broadcasts()
        snapshotted = reported_broadcasts(lake, connection.name, days)
        for day in days:  # oldest first: a broadcast's first snapshot lands on its first day
            rows = []
            for broadcast in listed:
                window = report_window(broadcast, day, broadcast.id in snapshotted)
                if window is None:
                    continue
                report = client.get_broadcast_report(broadcast.id, *window)
                rows.append(report_row(broadcast.id, report, window))
                snapshotted.add(broadcast.id)
            yield day, rows

    return rows_by_day


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
        report_rows_by_day(the_lake, datahub),
    )


# -- members ------------------------------------------------------------------------------

#: The columns read from the export file, by header name.
EXPORT_COLUMNS = ("member_id", *MEMBER_TEXT_COLUMNS)
#: Rows parsed before a batch is written: memory is bounded by this, not by the export.
EXPORT_BATCH_ROWS = 50_000
#: File metadata key: the `row_count` the export task announced.
EXPORT_ROW_COUNT = "export_row_count"


class ExportMismatch(Exception):
    """The export file lacks a column, or does not hold the rows its task announced."""


class _ByteStream(io.RawIOBase):
    """A readable file over an iterator of byte chunks (a streamed download)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = chunk
        size = min(len(buffer), len(self._left))
        buffer[:size] = self._left[:size]
        self._left = self._left[size:]
        return size


def member_batches(chunks: Iterator[bytes], connection: str) -> Iterator[pa.Table]:
    """The export CSV (UTF-8, header row, null as empty: the sandbox's choice) as tables of
    the members schema, EXPORT_BATCH_ROWS at a time. Columns are found by header name; a
    column the schema does not know is left out."""
    text = io.TextIOWrapper(io.BufferedReader(_ByteStream(chunks)), "utf-8-sig", newline="")
    reader = csv.reader(text)
    header = next(reader, None)
    if header is None:
        raise TruncatedBody("the members export file is empty, without its header")
    missing = [name for name in EXPORT_COLUMNS if name not in header]
    if missing:
        raise ExportMismatch(f"the members export file lacks the columns {missing}")
    positions = {name: header.index(name) for name in EXPORT_COLUMNS}
    batch: list[list[str]] = []
    for row in reader:
        if not row:
            continue
        if len(row) != len(header):
            # A cut body ends in a short line: download again (Transport retries this).
            raise TruncatedBody(f"members export line {reader.line_num} has {len(row)} fields")
        batch.append(row)
        if len(batch) == EXPORT_BATCH_ROWS:
            yield _members_table(batch, positions, connection)
            batch = []
    if batch:
        yield _members_table(batch, positions, connection)


def _members_table(rows: list[list[str]], positions: dict[str, int], connection: str) -> pa.Table:
    columns = []
    for field in MEMBERS.schema:
        if field.name == "connection":
            columns.append(pa.array([connection] * len(rows), pa.string()))
            continue
        position = positions[field.name]
        text = pa.array([row[position] or None for row in rows], pa.string())
        columns.append(text.cast(field.type))
    return pa.Table.from_arrays(columns, schema=MEMBERS.schema)


def land_member_export(
    client: DataHubClient, lake: Lake, connection: str, deadline_seconds: float
) -> int:
    """Export, wait for the task, stream its file into the lake; the file appears only when
    its rows equal the task's `row_count`."""
    what = (
        f"members export of connection {connection!r} "
        "(deadline: [service.datahub] export_deadline_seconds)"
    )
    task = client.wait_for_task(
        client.export_members(), deadline_seconds=deadline_seconds, what=what
    )
    row_count = ExportResult.model_validate(task.result or {}).row_count
    metadata = {
        "pulled_at": pulled_at(),
        "export_task_id": str(task.id),
        EXPORT_ROW_COUNT: str(row_count),
    }

    def land(chunks: Iterator[bytes]) -> int:
        with lake.writer(MEMBERS, connection, today(), metadata) as out:
            for table in member_batches(chunks, connection):
                out.write_table(table)
            if out.rows != row_count:
                raise ExportMismatch(
                    f"members export task {task.id} of connection {connection!r}: the file "
                    f"held {out.rows} rows, the task announced row_count {row_count}"
                )
        return out.rows

    return client.download_member_export(task.id, land)


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
    the_lake = lake.lake()
    stats = CallStats()
    counts: dict[str, int] = {}
    for connection in datahub.connections:
        with datahub.transport(connection, stats) as transport:
            counts[connection.name] = land_member_export(
                datahub.client(transport),
                the_lake,
                connection.name,
                datahub.export_deadline_seconds,
            )
        context.log.info(f"{MEMBERS.relation} [{connection.name}]: {counts[connection.name]} rows")
    return dg.MaterializeResult(
        metadata={
            "rows": sum(counts.values()),
            "rows_per_connection": counts,
            **stats.as_metadata(),
        }
    )


# -- checks -------------------------------------------------------------------------------


@dg.asset_check(asset=asset_key(MEMBERS), name="rows_equal_export_row_count", blocking=False)
def members_equal_export_row_count(lake: LakeResource) -> dg.AssetCheckResult:
    """Each connection's latest export holds the rows its task announced."""
    the_lake = lake.lake()
    landed: dict[str, int] = {}
    announced: dict[str, int] = {}
    for path in the_lake.files(MEMBERS):  # sorted by day: the latest file of each wins
        landed[path.stem] = pq.read_metadata(path).num_rows
        announced[path.stem] = int(the_lake.read_metadata(path).get(EXPORT_ROW_COUNT, -1))
    return dg.AssetCheckResult(
        passed=landed == announced,
        metadata={"rows_landed": landed, "export_row_count": announced},
    )


def _ids_per_connection(files: list, column: str) -> dict[str, set[int]]:
    if not files:
        return {}
    table = read_columns(files, [column, "connection"])
    found: dict[str, set[int]] = {}
    for connection, row_id in zip(
        table["connection"].to_pylist(), table[column].to_pylist(), strict=True
    ):
        found.setdefault(connection, set()).add(row_id)
    return found


@dg.asset_check(asset=asset_key(BROADCAST_REPORTS), name="one_report_per_broadcast", blocking=False)
def one_report_per_broadcast(lake: LakeResource) -> dg.AssetCheckResult:
    """The latest snapshots (the `datahub.broadcast_reports` view) hold one row for each
    broadcast of the `broadcasts` snapshot, and none for another."""
    the_lake = lake.lake()
    listed = _ids_per_connection(the_lake.files(BROADCASTS), "id")
    reported = _ids_per_connection(the_lake.files(BROADCAST_REPORTS), "broadcast_id")
    connections = sorted(set(listed) | set(reported))
    missing = {c: len(listed.get(c, set()) - reported.get(c, set())) for c in connections}
    unknown = {c: len(reported.get(c, set()) - listed.get(c, set())) for c in connections}
    return dg.AssetCheckResult(
        passed=not any(missing.values()) and not any(unknown.values()),
        metadata={"broadcasts_without_report": missing, "reports_of_unknown_broadcasts": unknown},
    )


ASSETS = [custom_fields, broadcasts, broadcast_reports, members]
CHECKS = [
    *(unique_ids_check(stream, asset_key(stream)) for stream in STREAMS),
    members_equal_export_row_count,
    one_report_per_broadcast,
]
