"""The `messages` stream: one backup per region for a run's whole range of days, its CSV file
landed day by day as it downloads (a backfill is one backup, not one per day)."""

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.clients.conversation import ConversationService
from pipelines.errors import DataRefused, ServiceRefused
from pipelines.lake import Lake
from pipelines.lake.drift import cast_texts, extra_column, place, watched_table
from pipelines.pull.csv_blocks import CsvFile, RecordTooLong, read_block, read_texts
from pipelines.pull.landing import PulledStream, Turn, pulled_at
from pipelines.stream import EXTRA, TIMESTAMP, connection_schema, described

#: The backup file's columns (the service documents no file format: sandbox/README.md). What
#: they hold is what the service documents of a message's fields (the AI agent request's).
MESSAGE_SCHEMA = connection_schema(
    [
        described("message_uuid", pa.string(), "The message's uuid."),
        described(
            "conversation_id",
            pa.int64(),
            "The conversation the message belongs to: a member's run of messages without a "
            "day of silence.",
        ),
        described("channel_id", pa.int64(), "The channel of the message (a channel's `id`)."),
        described(
            "member_id", pa.int64(), "The member whose conversation it is (a member's `id`)."
        ),
        described(
            "sender_type",
            pa.string(),
            "Who sent it: `member`, `user` (an agent) or `bot` (the service documents only "
            "`member`).",
        ),
        described(
            "sender_id",
            pa.int64(),
            "The sender's id: the member's id when `sender_type` is `member`.",
        ),
        described(
            "message_type",
            pa.string(),
            "`text` or `image` (the values the service documents; it shows no full list).",
        ),
        described("text", pa.string(), "The message's text; an empty string for an image."),
        described(
            "url",
            pa.string(),
            "An image message's durable public link to the image; null for other messages.",
        ),
        described(
            "mime_type", pa.string(), "An image message's MIME type; null for other messages."
        ),
        described("timestamp", TIMESTAMP, "When the message was sent, in UTC."),
    ]
)

#: Bytes of the backup file parsed at a time (`pipelines/pull/csv_blocks.py`), and so the longest
#: record the file may hold. Chat platforms cap a message at a few thousand characters;
#: memory holds a few blocks.
CSV_BLOCK_BYTES = 1 << 20
#: The file's columns the stream declares (`connection` and `_extra` are the lake's own).
BACKUP_FIELDS = [f for f in MESSAGE_SCHEMA if f.name not in ("connection", EXTRA.name)]
#: The declared columns' types, by name: how a block is read first.
BACKUP_TYPES = {f.name: f.type for f in BACKUP_FIELDS}
#: Empty in the file for text messages; null in the lake (only image messages carry them).
IMAGE_COLUMNS = ("url", "mime_type")


class BackupRecordTooLong(DataRefused):
    """A record of the backup file is longer than CSV_BLOCK_BYTES."""


class BackupMismatch(ServiceRefused):
    """The rows landed are not the backup file's: a row was misread, or the file held rows
    outside the range asked for."""


def _message_tables(file: CsvFile, connection: str) -> Iterator[tuple[date, pa.Table]]:
    """(day, rows of that day) pieces of the backup file in file order, a block at a time."""
    try:
        for block in file.blocks():
            table = _block_table(block, file.header, connection)
            days = pc.cast(table["timestamp"], pa.date32())
            for day in pc.unique(days).to_pylist():
                yield day, table.filter(pc.equal(days, day))
    except RecordTooLong:
        raise BackupRecordTooLong(
            f"a record of the backup file is longer than {CSV_BLOCK_BYTES} bytes "
            "(CSV_BLOCK_BYTES, pipelines/streams/conversation/backups.py)"
        ) from None


def _block_table(block: bytes, header: list[str], connection: str) -> pa.Table:
    """A block of the file as the stream's schema: read with the declared types; when a
    value does not read as its column's type, or a text is not UTF-8, the same block again
    as text, converted value by value (`_typed`)."""
    try:
        read = read_block(block, header, BACKUP_TYPES, check_utf8=True)
    except pa.ArrowInvalid:
        return _typed(read_texts(block, header), connection)
    rows = read.num_rows
    columns = {name: read[name] for name in read.column_names if name in BACKUP_TYPES}
    for name in IMAGE_COLUMNS:
        if name in columns:
            columns[name] = pc.if_else(pc.equal(columns[name], ""), None, columns[name])
    missing = [f.name for f in BACKUP_FIELDS if f.name not in columns]
    for name in missing:
        columns[name] = pa.nulls(rows, BACKUP_TYPES[name])
    new = read.select([name for name in read.column_names if name not in BACKUP_TYPES])
    columns["connection"] = pa.repeat(pa.scalar(connection), rows)
    columns[EXTRA.name] = extra_column(new, None, missing, rows)
    return pa.table(columns).select(MESSAGES.schema.names).cast(MESSAGES.schema)


def _typed(texts: pa.Table, connection: str) -> pa.Table:
    """A block of the file (every column text) as the stream's schema: each declared column
    as its type, blank as null where text is not its type (and in `IMAGE_COLUMNS`); what
    does not fit, a column the stream does not declare and one the file lacks in `_extra`."""
    rows = texts.num_rows
    columns, retyped, missing = {}, {}, []
    for declared in BACKUP_FIELDS:
        if declared.name not in texts.column_names:
            missing.append(declared.name)
            columns[declared.name] = pa.nulls(rows, declared.type)
            continue
        text = texts[declared.name].combine_chunks()
        if not pa.types.is_string(declared.type) or declared.name in IMAGE_COLUMNS:
            text = pc.if_else(pc.equal(text, ""), None, text)
        columns[declared.name], unread = cast_texts(text, declared.type)
        if unread is not None:
            retyped[declared.name] = unread
    new = texts.select([name for name in texts.column_names if name not in columns])
    columns["connection"] = pa.repeat(pa.scalar(connection), rows)
    columns[EXTRA.name] = extra_column(new, pa.table(retyped), missing, rows)
    return pa.table(columns).select(MESSAGES.schema.names).cast(MESSAGES.schema)


@dataclass
class BackupLanded:
    file_rows: int = 0
    rows_per_day: dict[date, int] = field(default_factory=dict)
    #: Days whose landed file already held exactly these rows: left as they were, so the
    #: members of their messages are not looked up again (`members.plan_members`).
    unchanged_days: list[date] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(self.rows_per_day.values())


def _already_landed(lake: Lake, connection: str, day: date, table: pa.Table) -> bool:
    path = lake.path(MESSAGES, connection, day)
    if not lake.exists(path):
        return False
    landed = lake.parquet_file(path)
    if landed.metadata.num_rows != table.num_rows:
        return False
    return landed.read().equals(table, check_metadata=False)


def land_backup(
    lake: Lake,
    connection: str,
    days: list[date],
    chunks: Iterable[bytes],
    watch: Callable[[pa.Table], pa.Table] | None = None,
) -> BackupLanded:
    """Write the file's days to their partitions as it streams. The file is oldest first, so
    one day is in memory at a time; a day of the range without messages gets an empty file.
    A day equal to what is landed is not written again. `watch`: what each day's rows go
    through first (their drift tallied, `pipelines/lake/drift.py`)."""
    file = CsvFile(chunks, CSV_BLOCK_BYTES)
    landed = BackupLanded()
    wanted = set(days)
    for day, pieces in itertools.groupby(_message_tables(file, connection), key=lambda p: p[0]):
        if day in landed.rows_per_day:
            raise ValueError(f"the backup file is not oldest first: {day} came back")
        if day not in wanted:
            continue  # outside the range asked for: not landed, so the counts will differ
        table = pa.concat_tables(piece for _, piece in pieces)
        if watch is not None:
            table = watch(table)
        landed.rows_per_day[day] = table.num_rows
        if _already_landed(lake, connection, day, table):
            landed.unchanged_days.append(day)
            continue
        with lake.writer(MESSAGES, connection, day, {"pulled_at": pulled_at()}) as out:
            out.write_table(table)
    for day in sorted(wanted - landed.rows_per_day.keys()):
        landed.rows_per_day[day] = 0
        empty = MESSAGES.schema.empty_table()
        if _already_landed(lake, connection, day, empty):
            landed.unchanged_days.append(day)
        else:
            lake.write(MESSAGES, connection, [], day=day, metadata={"pulled_at": pulled_at()})
    landed.file_rows = file.records
    return landed


def backup_window(days: list[date]) -> tuple[datetime, datetime]:
    """[first day 00:00 UTC, the day after the last 00:00 UTC): the backup's window."""
    return (
        datetime.combine(days[0], time(), UTC),
        datetime.combine(days[-1] + timedelta(days=1), time(), UTC),
    )


def land_messages(turn: Turn) -> int:
    """One region's messages of the run's days (oldest first), through one backup:
    triggered, waited for, and landed as its file downloads."""
    days, client, name = turn.days, turn.client, turn.connection.name
    started_at, ended_at = backup_window(days)
    backup_id = client.trigger_messages_backup(started_at, ended_at).backup_id
    turn.report("backup_ids", backup_id)
    turn.log(f"backup {backup_id} of {started_at.isoformat()} to {ended_at.isoformat()}")
    client.wait_for_backup(backup_id)
    watch = partial(
        watched_table,
        drift=turn.landed.drift,
        contract=turn.service.contract(MESSAGES.name),
        where=place(turn.service.service, name, MESSAGES.relation),
    )
    landed = client.download_backup(
        backup_id, partial(land_backup, turn.lake, name, days, watch=watch)
    )
    turn.report("backup_rows_per_connection", landed.file_rows)
    for day in days:
        turn.landed_day(day, None if day in landed.unchanged_days else landed.rows_per_day[day])
    if landed.rows != landed.file_rows:
        raise BackupMismatch(
            f"{MESSAGES.relation} [{name}]: backup {backup_id} held {landed.file_rows} rows, "
            f"{landed.rows} landed for {days[0]} to {days[-1]}"
        )
    return landed.rows


MESSAGES = PulledStream(
    ConversationService.service,
    "messages",
    MESSAGE_SCHEMA,
    daily=True,
    day="The UTC day of `timestamp` (the partition).",
    key=("message_uuid",),
    # The service documents no retention: a first sync reaches a full year back from now,
    # which touches 366 calendar days.
    history_days=366,
    lands=land_messages,
    hourly=True,
    description=(
        "Messages by UTC day, through one backup per region for the whole range of a run (a "
        "backfill is one backup, not one per day)."
    ),
)
