"""Members through the export task: start it, wait for it, stream its CSV file into the lake
in batches, and land the file only when it holds the rows the task announced."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator

import pyarrow as pa

from pipelines.clients.datahub import DataHub, ExportResult
from pipelines.clients.failures import isolated
from pipelines.lake import Lake
from pipelines.landing import Landed, Pull, pulled_at, today
from pipelines.streams.datahub import MEMBER_TEXT_COLUMNS, MEMBERS
from pipelines.transport import CallStats, Transport, TruncatedBody

#: The columns read from the export file, by header name.
EXPORT_COLUMNS = ("member_id", *MEMBER_TEXT_COLUMNS)
#: Rows parsed before a batch is written: memory is bounded by this, not by the export.
EXPORT_BATCH_ROWS = 50_000
#: File metadata key: the `row_count` the export task announced.
EXPORT_ROW_COUNT = "export_row_count"
#: The longest field read, in characters: the spec bounds none of the profile's texts, and
#: the csv module's default (131,072) would fail a long address. The largest the module takes
#: on every platform (a C long); a field is in memory with its row either way.
EXPORT_FIELD_CHARS = 2**31 - 1
# For the whole process: the csv module has no limit per reader.
csv.field_size_limit(max(csv.field_size_limit(), EXPORT_FIELD_CHARS))


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
    column the schema does not know is left out. Bytes that are not UTF-8 are read as
    U+FFFD, as the transport reads them in JSON (`pipelines/transport.py`)."""
    raw = io.BufferedReader(_ByteStream(chunks))
    text = io.TextIOWrapper(raw, "utf-8-sig", errors="replace", newline="")
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
    datahub: DataHub,
    transport: Transport,
    lake: Lake,
    connection: str,
) -> int:
    """Export, wait for the task, stream its file into the lake as `today()`'s; the file
    appears only when its rows equal the task's `row_count`. Both clocks are asked once the
    task is done, so an export that ends after midnight lands on the day it ended."""
    client = datahub.client(transport)
    what = (
        f"members export of connection {connection!r} "
        "(deadline: [service.datahub] export_deadline_seconds)"
    )
    task = client.wait_for_task(
        client.export_members(), deadline_seconds=datahub.export_deadline_seconds, what=what
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


def land_member_exports(
    datahub: DataHub,
    lake: Lake,
    stats: CallStats,
    log: Callable[[str], None],
    failed: dict[str, str],
) -> dict[str, int]:
    """One export per connection, in turn; the rows each landed (a connection that fails
    goes to `failed`). Not `land_snapshot`'s loop (`pipelines/landing.py`): the file is
    daily, and its metadata holds what the task said."""
    counts: dict[str, int] = {}
    for connection in datahub.connections:
        with isolated(datahub, connection, failed):
            with datahub.transport(connection, stats) as transport:
                counts[connection.name] = land_member_export(
                    datahub, transport, lake, connection.name
                )
            log(f"{MEMBERS.relation} [{connection.name}]: {counts[connection.name]} rows")
    return counts


def land_members(pull: Pull) -> Landed:
    """Today's export of every connection (`land_member_exports`)."""
    landed = Landed()
    counts = land_member_exports(pull.service, pull.lake, landed.stats, pull.log, landed.failed)
    landed.rows_per_connection.update(counts)
    return landed
