"""The data hub's `members` stream, through the export task: start it, wait for it, stream
its CSV file into the lake in batches, and land the file only when it holds the rows the
task announced."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.clients.datahub import DataHub, ExportResult
from pipelines.errors import ServiceRefused
from pipelines.lake.drift import cast_texts, extra_column
from pipelines.pull.csv_blocks import CsvFile, RecordTooLong, read_texts
from pipelines.pull.landing import PulledStream, Turn, pulled_at
from pipelines.stream import CONNECTION, EXTRA, described
from pipelines.transport import TruncatedBody

#: The export file's columns besides `member_id` (the hub's contact profile fields).
MEMBER_TEXT_COLUMNS = (
    "customer_id",
    "connect_id",
    "full_name",
    "display_name",
    "display_email",
    "display_mobile",
    "gender",
    "birthday",
    "region",
    "city",
    "address",
    "company",
    "member_level",
    "source",
    "line_uid",
    "channel_type",
    "external_member_id",
    "account_manager",
)

#: What each contact profile field of the export holds, as far as the hub documents it (null
#: where the export had an empty value).
_PROFILE_NOTES = {
    "customer_id": "The contact's customer id; an import can match contacts on it.",
    "connect_id": "The contact's connect id; an import can match contacts on it.",
    "full_name": "The contact's full name.",
    "display_name": "The contact's display name.",
    "display_email": "The contact's email address; an import can match contacts on it.",
    "display_mobile": "The contact's mobile number, E.164; an import can match contacts on it.",
    "gender": "`male`, `female`, `unknown` or `other`.",
    "birthday": "The contact's birthday, as YYYY-MM-DD text.",
    "region": "A region or country code.",
    "city": "The contact's city.",
    "address": "The contact's address.",
    "company": "The contact's company.",
    "member_level": "The contact's member level, as the hub sends it (no values are documented).",
    "source": "`maac` or `caac`.",
    "line_uid": "The contact's LINE user id; an import can match contacts on it.",
    "channel_type": (
        "The contact's channel: `line`, `fb`, `ig`, `whatsapp`, `email`, `wccs` or `others` "
        "(the hub's internal values)."
    ),
    "external_member_id": (
        "The contact's member id on its channel (a profile update names the contact by it, "
        "with `channel_type` and `external_channel_id`)."
    ),
    "account_manager": "The contact's account manager, as the hub sends it.",
}

#: The columns read from the export file, by header name.
EXPORT_COLUMNS = ("member_id", *MEMBER_TEXT_COLUMNS)
#: Rows written at a time (a row group): memory is bounded by this, not by the export.
EXPORT_BATCH_ROWS = 50_000
#: Bytes of the file parsed at a time (`pipelines/pull/csv_blocks.py`), and so the longest record
#: it may hold: the spec bounds none of the profile's texts; a megabyte holds the longest
#: address many times over.
EXPORT_BLOCK_BYTES = 1 << 20
#: File metadata key: the `row_count` the export task announced.
EXPORT_ROW_COUNT = "export_row_count"
#: How Arrow says a record has another number of fields than the header (`got N`).
FIELDS_GOT = re.compile(r"Expected \d+ columns, got (\d+)")


class ExportMismatch(ServiceRefused):
    """The export file does not hold the rows its task announced, or holds a record longer
    than a block."""


def member_batches(chunks: Iterator[bytes], connection: str) -> Iterator[pa.Table]:
    """The export CSV (UTF-8, header row, null as empty: the sandbox's choice) as tables of
    the members schema, EXPORT_BATCH_ROWS at a time. Columns are found by header name; a
    column the schema does not know, one it lacks and a value that does not read as its
    column's type go to `_extra` (`pipelines/lake/drift.py`). Bytes that are not UTF-8 are read
    as U+FFFD, as the transport reads them in JSON (`pipelines/transport/`)."""
    file = CsvFile(chunks, EXPORT_BLOCK_BYTES)
    header = file.header
    if not header:
        raise TruncatedBody("the members export file is empty, without its header")
    columns = Columns(
        present=tuple(name for name in EXPORT_COLUMNS if name in header),
        new=tuple(name for name in header if name not in EXPORT_COLUMNS),
        missing=tuple(name for name in EXPORT_COLUMNS if name not in header),
    )
    pending: list[pa.Table] = []
    pending_rows = 0
    try:
        for block in file.blocks():
            table = _members_table(_texts(block, header, file.lines_before), columns, connection)
            pending.append(table)
            pending_rows += table.num_rows
            while pending_rows >= EXPORT_BATCH_ROWS:
                rows = pa.concat_tables(pending)
                yield rows.slice(0, EXPORT_BATCH_ROWS)
                pending = [rows.slice(EXPORT_BATCH_ROWS)]
                pending_rows -= EXPORT_BATCH_ROWS
    except RecordTooLong:
        raise ExportMismatch(
            f"a record of the members export is longer than {EXPORT_BLOCK_BYTES} bytes "
            "(EXPORT_BLOCK_BYTES, pipelines/streams/datahub/export.py)"
        ) from None
    if pending_rows:
        yield pa.concat_tables(pending)


def _texts(block: bytes, header: list[str], lines_before: int) -> pa.Table:
    """A block's records, every column text. A record short of fields is a cut body (the
    file's last line): download again, which the transport does for `TruncatedBody`."""
    try:
        return read_texts(block, header)
    except pa.ArrowInvalid as error:
        got = FIELDS_GOT.search(str(error))
        if got is None:
            raise
        # Arrow does not say where: the line is the last one of the block (a cut body).
        line = lines_before + block.count(b"\n") + (not block.endswith(b"\n"))
        raise TruncatedBody(f"members export line {line} has {got.group(1)} fields") from None


@dataclass(frozen=True)
class Columns:
    """The export's columns by the schema: the declared ones its header has, the ones the
    schema does not know, and the declared ones it lacks."""

    present: tuple[str, ...]
    new: tuple[str, ...]
    missing: tuple[str, ...]


def _members_table(texts: pa.Table, columns: Columns, connection: str) -> pa.Table:
    rows = texts.num_rows
    arrays, retyped = [], {}
    for field in MEMBERS.schema:
        if field.name == "connection":
            arrays.append(pa.repeat(pa.scalar(connection), rows))
        elif field.name == EXTRA.name:
            continue
        elif field.name in columns.missing:
            arrays.append(pa.nulls(rows, field.type))
        else:
            text = _blank_as_null(texts[field.name])
            cast, unread = cast_texts(text, field.type)
            arrays.append(cast)
            if unread is not None:
                retyped[field.name] = unread
    new = {name: _blank_as_null(texts[name]) for name in columns.new}
    arrays.append(extra_column(pa.table(new), pa.table(retyped), columns.missing, rows))
    return pa.Table.from_arrays(arrays, schema=MEMBERS.schema)


def _blank_as_null(column: pa.ChunkedArray) -> pa.Array:
    """The export writes null as an empty field."""
    text = column.combine_chunks()
    return pc.if_else(pc.equal(text, ""), None, text)


def land_member_export(turn: Turn) -> int:
    """Export one connection's members, wait for the task, stream its file into the lake as
    the file of the day the task ended; the file appears only when its rows equal the task's
    `row_count`. The day is asked once the task is done, so an export that ends after
    midnight lands on the day it ended."""
    datahub: DataHub = turn.service
    client, connection = turn.client, turn.connection.name
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
        with turn.lake.writer(MEMBERS, connection, turn.today(), metadata) as out:
            tables = member_batches(chunks, connection)
            for table in turn.landed.watched(tables, datahub, MEMBERS, connection):
                out.write_table(table)
            if out.rows != row_count:
                raise ExportMismatch(
                    f"members export task {task.id} of connection {connection!r}: the file "
                    f"held {out.rows} rows, the task announced row_count {row_count}"
                )
        return out.rows

    return client.download_member_export(task.id, land)


MEMBERS = PulledStream(
    DataHub.service,
    "members",
    pa.schema(
        [
            described("member_id", pa.int64(), "The member's id (a field of the export only)."),
            *(described(name, pa.string(), _PROFILE_NOTES[name]) for name in MEMBER_TEXT_COLUMNS),
            CONNECTION,
            EXTRA,
        ]
    ),
    # One export per connection and day, kept: the latest is `datahub.members`, the
    # sequence is the profiles' change history (`marts.member_profile_history`).
    daily=True,
    day="The UTC day the export task ended (the partition): one export per connection and day.",
    key=("date", "member_id"),
    lands=land_member_export,
    description=(
        "Member profiles through the export task (a CSV file streamed in batches), one "
        "export per connection and day, kept as the profiles' history."
    ),
    formats=frozenset({"csv"}),
    # A file a day, but each run exports today's: there is no older day to ask for.
    today_only=True,
)
