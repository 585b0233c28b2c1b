"""Members through the export task: start it, wait for it, stream its CSV file into the lake
in batches, and land the file only when it holds the rows the task announced."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from pipelines.clients.base import Connection
from pipelines.clients.datahub import DataHub, ExportResult
from pipelines.clients.failures import each_connection
from pipelines.drift import cast_texts, extra_column
from pipelines.lake import EXTRA, Lake
from pipelines.landing import Landed, Pull, pulled_at, today
from pipelines.streams.datahub import MEMBER_TEXT_COLUMNS, MEMBERS
from pipelines.transport import Transport, TruncatedBody

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
    column the schema does not know, one it lacks and a value that does not read as its
    column's type go to `_extra` (`pipelines/drift.py`). Bytes that are not UTF-8 are read
    as U+FFFD, as the transport reads them in JSON (`pipelines/transport.py`)."""
    raw = io.BufferedReader(_ByteStream(chunks))
    text = io.TextIOWrapper(raw, "utf-8-sig", errors="replace", newline="")
    reader = csv.reader(text)
    header = next(reader, None)
    if header is None:
        raise TruncatedBody("the members export file is empty, without its header")
    columns = Columns(
        positions={name: header.index(name) for name in EXPORT_COLUMNS if name in header},
        new={name: index for index, name in enumerate(header) if name not in EXPORT_COLUMNS},
        missing=tuple(name for name in EXPORT_COLUMNS if name not in header),
    )
    batch: list[list[str]] = []
    for row in reader:
        if not row:
            continue
        if len(row) != len(header):
            # A cut body ends in a short line: download again (Transport retries this).
            raise TruncatedBody(f"members export line {reader.line_num} has {len(row)} fields")
        batch.append(row)
        if len(batch) == EXPORT_BATCH_ROWS:
            yield _members_table(batch, columns, connection)
            batch = []
    if batch:
        yield _members_table(batch, columns, connection)


@dataclass(frozen=True)
class Columns:
    """Where the export's header puts each column: the declared ones it has, the ones the
    schema does not know, and the declared ones it lacks."""

    positions: dict[str, int]
    new: dict[str, int]
    missing: tuple[str, ...]


def _members_table(rows: list[list[str]], columns: Columns, connection: str) -> pa.Table:
    arrays, retyped = [], {}
    for field in MEMBERS.schema:
        if field.name == "connection":
            arrays.append(pa.array([connection] * len(rows), pa.string()))
        elif field.name == EXTRA.name:
            continue
        elif field.name in columns.missing:
            arrays.append(pa.nulls(len(rows), field.type))
        else:
            position = columns.positions[field.name]
            text = pa.array([row[position] or None for row in rows], pa.string())
            cast, unread = cast_texts(text, field.type)
            arrays.append(cast)
            if unread is not None:
                retyped[field.name] = unread
    new = {
        name: pa.array([row[index] or None for row in rows], pa.string())
        for name, index in columns.new.items()
    }
    arrays.append(extra_column(pa.table(new), pa.table(retyped), columns.missing, len(rows)))
    return pa.Table.from_arrays(arrays, schema=MEMBERS.schema)


def land_member_export(
    datahub: DataHub, transport: Transport, lake: Lake, connection: str, landed: Landed
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
            tables = member_batches(chunks, connection)
            for table in landed.watched(tables, datahub, MEMBERS, connection):
                out.write_table(table)
            if out.rows != row_count:
                raise ExportMismatch(
                    f"members export task {task.id} of connection {connection!r}: the file "
                    f"held {out.rows} rows, the task announced row_count {row_count}"
                )
        return out.rows

    return client.download_member_export(task.id, land)


def land_members(pull: Pull) -> Landed:
    """Today's export of every connection, the connections at once (a connection that fails
    goes to `failed`). Not `land_snapshot` (`pipelines/landing.py`): the file is daily, and
    its metadata holds what the task said."""
    landed = Landed()
    datahub = pull.service

    def turn(connection: Connection) -> None:
        with datahub.transport(connection, landed.stats) as transport:
            rows = land_member_export(datahub, transport, pull.lake, connection.name, landed)
        landed.rows_per_connection[connection.name] = rows
        pull.log(f"{MEMBERS.relation} [{connection.name}]: {rows} rows")

    each_connection(datahub, landed.failed, turn)
    return landed.in_order_of(datahub.connections)
