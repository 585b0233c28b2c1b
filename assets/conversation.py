"""Conversation service streams (spec: conversation-api.md), one asset each.

Connections are regions (`default`, `jp`); every row carries its `connection`. Messages come
through message backups, one per connection for a run's whole range; members and their
assignments are looked up by id for the members seen in the landed messages.
"""

import io
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import partial
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from assets.checks import unique_ids_check
from assets.landing import (
    land_snapshot,
    partition_days,
)
from assets.partitions import daily, single_run
from assets.resources import ConversationResource, LakeResource
from pipelines.clients.base import Connection, Model
from pipelines.clients.conversation import ConversationClient
from pipelines.lake import QUERY_SETTINGS, Lake, Stream
from pipelines.landing import parse_moment, pulled_at
from pipelines.paging import cursor_pages
from pipelines.streams.conversation import (
    ASSIGNMENTS,
    CHANNELS,
    MEMBERS,
    MESSAGES,
    SERVICE,
    STREAMS,
    TEAMS,
    TIMESTAMP,
    USERS,
)
from pipelines.transport import CallStats, ServiceError, Transport

POOL = "conversation_api"
KINDS = {"python", "parquet"}
#: Bytes of the backup file parsed at a time (Arrow's CSV block).
CSV_BLOCK_BYTES = 1 << 20
#: Members looked up per batch of the ones seen in messages: bounds what is in flight.
MEMBER_BATCH = 1000


def _key(name: str) -> dg.AssetKey:
    return dg.AssetKey([SERVICE, name])


def _row(record: Model, stream: Stream) -> dict:
    """The stream's columns from a response record; timestamp columns parsed."""
    row = {}
    for column in stream.schema:
        if column.name == "connection":
            continue
        value = getattr(record, column.name, None)
        row[column.name] = parse_moment(value) if column.type == TIMESTAMP else value
    return row


# -- channels, teams, users ------------------------------------------------------------------


def _channel_rows(client: ConversationClient) -> Iterator[dict]:
    # The full list, not the paginated one: only it carries the full record (spec section 2).
    for channel in client.list_channels().channels:
        yield _row(channel, CHANNELS)


def _team_rows(client: ConversationClient) -> Iterator[dict]:
    def fetch(cursor: str | None) -> tuple[list, str | None]:
        page = client.list_teams(cursor)
        return page.teams, page.cursor.after

    for teams in cursor_pages(fetch):
        yield from (_row(team, TEAMS) for team in teams)


def _user_rows(client: ConversationClient) -> Iterator[dict]:
    def fetch(cursor: str | None) -> tuple[list, str | None]:
        page = client.list_users(cursor)
        return page.users, page.cursor.after

    for users in cursor_pages(fetch):
        yield from (_row(user, USERS) for user in users)


def _directory_asset(
    stream: Stream, rows: Callable[[ConversationClient], Iterable[dict]], doc: str
):
    @dg.asset(
        key=_key(stream.name),
        group_name=SERVICE,
        kinds=KINDS,
        pool=POOL,
        description=doc,
    )
    def directory_asset(
        context: dg.AssetExecutionContext, conversation: ConversationResource, lake: LakeResource
    ) -> dg.MaterializeResult:
        return land_snapshot(
            context,
            conversation,
            lake.lake(),
            stream,
            lambda transport, connection: rows(conversation.client(transport)),
        )

    return directory_asset


channels = _directory_asset(
    CHANNELS, _channel_rows, "Channels of each region (`list_channels`, full records)."
)
teams = _directory_asset(TEAMS, _team_rows, "Teams of each region (`list_teams`, cursor pages).")
users = _directory_asset(USERS, _user_rows, "Users of each region (`list_users`, cursor pages).")


# -- messages: one backup per connection for the run's range ---------------------------------

BACKUP_COLUMNS = [name for name in MESSAGES.schema.names if name != "connection"]
#: Empty in the file for text messages; null in the lake (spec section 9: image messages only).
IMAGE_COLUMNS = ("url", "mime_type")


class _Chunks(io.RawIOBase):
    """A read-only file over the download's chunks, for Arrow's streaming CSV reader; counts
    the file's records as they pass (see `_RecordCounter`)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._pending = b""
        self.records = _RecordCounter()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self.records.feed(chunk)
            self._pending = chunk
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


class _RecordCounter:
    """The file's data rows, counted from its bytes (line ends outside quotes, RFC 4180)
    independently of the parser: a row the parser got wrong shows as a mismatch."""

    def __init__(self) -> None:
        self._line_ends = 0
        self._quoted = False
        self._open_line = False

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        # Quotes toggle the state; an escaped quote ("") toggles it twice.
        for index, part in enumerate(chunk.split(b'"')):
            if index:
                self._quoted = not self._quoted
            if not self._quoted:
                self._line_ends += part.count(b"\n")
        self._open_line = not chunk.endswith(b"\n")

    @property
    def rows(self) -> int:
        return max(0, self._line_ends + self._open_line - 1)  # minus the header


def _message_tables(file: io.RawIOBase, connection: str) -> Iterator[tuple[date, pa.Table]]:
    """(day, rows of that day) pieces of the backup file in file order, a block at a time."""
    reader = pacsv.open_csv(
        io.BufferedReader(file),
        read_options=pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES),
        # Texts hold commas, quotes and line breaks (sandbox README: backup file).
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types={f.name: f.type for f in MESSAGES.schema if f.name != "connection"},
            include_columns=BACKUP_COLUMNS,
        ),
    )
    for batch in reader:
        table = pa.Table.from_batches([batch])
        for name in IMAGE_COLUMNS:
            column = table[name]
            blank = pc.equal(column, "")
            index = table.schema.get_field_index(name)
            table = table.set_column(index, name, pc.if_else(blank, None, column))
        table = table.append_column("connection", pa.repeat(connection, table.num_rows))
        days = pc.cast(table["timestamp"], pa.date32())
        for day in pc.unique(days).to_pylist():
            yield day, table.filter(pc.equal(days, day))


@dataclass
class BackupLanded:
    file_rows: int = 0
    rows_per_day: dict[date, int] = field(default_factory=dict)
    #: Days whose landed file already held exactly these rows: left as they were, so the
    #: members of their messages are not looked up again (`_plan_members`).
    unchanged_days: list[date] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(self.rows_per_day.values())


def _already_landed(lake: Lake, connection: str, day: date, table: pa.Table) -> bool:
    path = lake.path(MESSAGES, connection, day)
    if not path.exists():
        return False
    landed = pq.ParquetFile(path)
    if landed.metadata.num_rows != table.num_rows:
        return False
    return landed.read().equals(table, check_metadata=False)


def _land_backup(
    lake: Lake, connection: str, days: list[date], chunks: Iterable[bytes]
) -> BackupLanded:
    """Write the file's days to their partitions as it streams. The file is oldest first, so
    one day is in memory at a time; a day of the range without messages gets an empty file.
    A day equal to what is landed is not written again."""
    file = _Chunks(chunks)
    landed = BackupLanded()
    wanted = set(days)
    for day, pieces in itertools.groupby(_message_tables(file, connection), key=lambda p: p[0]):
        if day in landed.rows_per_day:
            raise ValueError(f"the backup file is not oldest first: {day} came back")
        if day not in wanted:
            continue  # outside the range asked for: not landed, so the counts will differ
        table = pa.concat_tables(piece for _, piece in pieces)
        table = table.select(MESSAGES.schema.names).cast(MESSAGES.schema)
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
    landed.file_rows = file.records.rows
    return landed


def _range_bounds(days: list[date]) -> tuple[datetime, datetime]:
    """[first day 00:00 UTC, the day after the last 00:00 UTC): the backup's window."""
    return (
        datetime.combine(days[0], time(), UTC),
        datetime.combine(days[-1] + timedelta(days=1), time(), UTC),
    )


@dg.asset(
    key=_key("messages"),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    partitions_def=daily,
    backfill_policy=single_run,
    description="Messages by UTC day, through one message backup per region for the whole "
    "range of a run (a backfill is one backup, not one per day).",
)
def messages(
    context: dg.AssetExecutionContext, conversation: ConversationResource, lake: LakeResource
) -> dg.MaterializeResult:
    days = partition_days(context)
    started_at, ended_at = _range_bounds(days)
    store = lake.lake()
    stats = CallStats()
    landed: dict[str, BackupLanded] = {}
    backup_ids: dict[str, int] = {}
    for connection in conversation.connections:
        with conversation.transport(connection, stats) as transport:
            client = conversation.client(transport)
            backup_id = client.trigger_messages_backup(started_at, ended_at).backup_id
            backup_ids[connection.name] = backup_id
            context.log.info(
                f"{MESSAGES.relation} [{connection.name}]: backup {backup_id} of "
                f"{started_at.isoformat()} to {ended_at.isoformat()}"
            )
            client.wait_for_backup(backup_id)
            landed[connection.name] = client.download_backup(
                backup_id, partial(_land_backup, store, connection.name, days)
            )
        context.log.info(
            f"{MESSAGES.relation} [{connection.name}]: {landed[connection.name].rows} rows "
            f"over {len(days)} day(s)"
        )
    metadata = {
        "rows": sum(result.rows for result in landed.values()),
        "rows_per_connection": {name: result.rows for name, result in landed.items()},
        "backup_rows": sum(result.file_rows for result in landed.values()),
        "backup_rows_per_connection": {name: r.file_rows for name, r in landed.items()},
        "backup_ids": backup_ids,
        "days": len(days),
        "unchanged_days": sum(len(result.unchanged_days) for result in landed.values()),
        "first_day": days[0].isoformat(),
        "last_day": days[-1].isoformat(),
        **stats.as_metadata(),
    }
    differ = sorted(name for name, result in landed.items() if result.rows != result.file_rows)
    if differ:
        raise dg.Failure(
            description=f"{MESSAGES.relation}: rows landed differ from the backup file's rows "
            f"for {differ}",
            metadata=metadata,
        )
    return dg.MaterializeResult(metadata=metadata)


def _landed_rows(lake: Lake, connection: str, days: Iterable[date]) -> int:
    total = 0
    for day in days:
        path = lake.path(MESSAGES, connection, day)
        total += pq.ParquetFile(path).metadata.num_rows if path.exists() else 0
    return total


@dg.asset_check(asset=_key("messages"), name="rows_match_backup", blocking=False)
def rows_match_backup(
    context: dg.AssetCheckExecutionContext, conversation: ConversationResource, lake: LakeResource
) -> dg.AssetCheckResult:
    """The lake still holds, for the last materialized range, the backup file's row count."""
    event = context.instance.get_latest_materialization_event(_key("messages"))
    if event is None or event.asset_materialization is None:
        return dg.AssetCheckResult(passed=False, description="messages were never materialized")
    metadata = event.asset_materialization.metadata
    first = date.fromisoformat(metadata["first_day"].value)
    last = date.fromisoformat(metadata["last_day"].value)
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    backup = metadata["backup_rows_per_connection"].value
    store = lake.lake()
    in_lake = {c.name: _landed_rows(store, c.name, days) for c in conversation.connections}
    return dg.AssetCheckResult(
        passed=in_lake == backup,
        metadata={"rows_in_lake": in_lake, "backup_rows": backup, "first_day": str(first)},
    )


# -- members and assignments: by id, for the members seen in messages ------------------------

MEMBERS_SEEN = "SELECT DISTINCT channel_id, member_id FROM read_parquet($files)"


def _message_files(lake: Lake, connection: str) -> list[str]:
    return [str(lake.path(MESSAGES, connection, day)) for day in lake.days(MESSAGES, connection)]


def _count_members_seen(lake: Lake, connection: str) -> int:
    files = _message_files(lake, connection)
    if not files:
        return 0
    with duckdb.connect(config=QUERY_SETTINGS) as con:
        query = f"SELECT count(*) FROM ({MEMBERS_SEEN})"
        [(count,)] = con.execute(query, {"files": files}).fetchall()
    return count


#: Snapshot metadata: the newest message file (mtime, ns) whose members the snapshot holds.
MESSAGES_THROUGH = "messages_through_ns"


def _message_file_times(lake: Lake, connection: str) -> dict[str, int]:
    """The connection's message files and when each was last written (ns)."""
    return {p: Path(p).stat().st_mtime_ns for p in _message_files(lake, connection)}


@dataclass
class _MemberPlan:
    """One connection's members snapshot: whom to look up, whose rows to keep as they are
    (SQL over the temporary tables `_plan_members` makes)."""

    lookups: str
    kept: str | None


def _plan_members(
    con: duckdb.DuckDBPyConnection, lake: Lake, stream: Stream, connection: str, everyone: bool
) -> _MemberPlan:
    """A member is looked up when they are in a message file landed since the previous
    snapshot, or were not in it; everyone else keeps their row. So a sync with no new
    messages makes no lookups, and one with new messages looks up only their members.
    `everyone` (or a snapshot without the marker) looks up every member seen."""
    files = _message_file_times(lake, connection)
    _distinct_members(con, "seen", list(files))
    snapshot = lake.path(stream, connection)
    previous = lake.read_metadata(snapshot).get(MESSAGES_THROUGH) if snapshot.exists() else None
    if everyone or previous is None:
        return _MemberPlan("SELECT * FROM seen ORDER BY ALL", None)
    _distinct_members(con, "recent", [p for p, mtime in files.items() if mtime > int(previous)])
    member_id = stream.key[1]
    con.execute(
        f"""
        CREATE TEMP TABLE landed AS
        SELECT channel_id, {member_id} AS member_id FROM read_parquet($snapshot)
        """,
        {"snapshot": str(snapshot)},
    )
    return _MemberPlan(
        lookups="""
            SELECT * FROM recent
            UNION SELECT * FROM (SELECT * FROM seen ANTI JOIN landed USING (channel_id, member_id))
            ORDER BY ALL
        """,
        kept=f"""
            SELECT previous.* EXCLUDE (connection)
            FROM read_parquet('{_quoted(snapshot)}') AS previous
            SEMI JOIN (
                SELECT * FROM seen ANTI JOIN recent USING (channel_id, member_id)
            ) AS keep
            ON previous.channel_id = keep.channel_id AND previous.{member_id} = keep.member_id
        """,
    )


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")


def _distinct_members(con: duckdb.DuckDBPyConnection, table: str, files: list[str]) -> None:
    """A temporary table of the distinct (channel_id, member_id) of message files."""
    if files:
        con.execute(f"CREATE TEMP TABLE {table} AS {MEMBERS_SEEN}", {"files": files})
    else:
        con.execute(f"CREATE TEMP TABLE {table} (channel_id BIGINT, member_id BIGINT)")


def _land_per_member(
    context: dg.AssetExecutionContext,
    conversation: ConversationResource,
    lake: Lake,
    stream: Stream,
    row_of: Callable[[ConversationClient, int, int], dict],
) -> dg.MaterializeResult:
    """Each connection's snapshot of `stream`: the rows `_plan_members` keeps, then
    `row_of(client, channel_id, member_id)` for the members it picks, on a small thread pool
    over the connection's transport. A member the service no longer knows (404) is skipped
    and counted."""
    looked_up, kept, not_found = Counter(), Counter(), Counter()

    def rows_of(transport: Transport, connection: Connection) -> Iterator[dict | pa.Table]:
        name, client = connection.name, conversation.client(transport)
        looked_up[name] = kept[name] = not_found[name] = 0

        def lookup(pair: tuple[int, int]) -> dict | None:
            try:
                return row_of(client, *pair)
            except ServiceError as error:
                if error.status != 404:
                    raise
                return None

        with duckdb.connect(config=QUERY_SETTINGS) as con:
            plan = _plan_members(con, lake, stream, name, conversation.refresh_every_member)
            if plan.kept is not None:
                for batch in con.sql(plan.kept).to_arrow_reader(MEMBER_BATCH):
                    kept[name] += batch.num_rows
                    yield pa.Table.from_batches([batch])
            pending = con.execute(plan.lookups)
            with ThreadPoolExecutor(conversation.member_workers) as pool:
                while batch := pending.fetchmany(MEMBER_BATCH):
                    looked_up[name] += len(batch)
                    found = [row for row in pool.map(lookup, batch) if row is not None]
                    not_found[name] += len(batch) - len(found)
                    yield from found

    def messages_through(connection: Connection) -> dict[str, str]:
        # Taken before the plan reads the files: a file landed in between is looked up
        # again next time, never missed.
        times = _message_file_times(lake, connection.name)
        return {MESSAGES_THROUGH: str(max(times.values(), default=0))}

    result = land_snapshot(
        context,
        conversation,
        lake,
        stream,
        rows_of,
        extra_metadata=lambda: {
            "looked_up": dict(looked_up),
            "kept_from_last_snapshot": dict(kept),
            "not_found": dict(not_found),
        },
        file_metadata=messages_through,
    )
    if sum(not_found.values()):
        context.log.warning(
            f"{stream.relation}: members seen in messages but unknown to the service (404), "
            f"skipped: {dict(not_found)}"
        )
    return result


def _member_row(client: ConversationClient, channel_id: int, member_id: int) -> dict:
    member = client.get_member_by_id(channel_id, member_id)
    return {**_row(member, MEMBERS), "channel_id": channel_id}


def _assignment_row(client: ConversationClient, channel_id: int, member_id: int) -> dict:
    assignment = client.get_member_assignment(channel_id, member_id)
    relationship = assignment.assignment_relationship
    return {
        "channel_id": channel_id,
        "member_id": member_id,
        "assign_type": assignment.assign_type,
        "team_id": relationship.team_id if relationship else None,
        "user_id": relationship.user_id if relationship else None,
    }


def _per_member_asset(
    stream: Stream, row_of: Callable[[ConversationClient, int, int], dict], doc: str
):
    @dg.asset(
        key=_key(stream.name),
        group_name=SERVICE,
        kinds=KINDS,
        pool=POOL,
        deps=[_key("messages")],
        description=doc,
    )
    def per_member_asset(
        context: dg.AssetExecutionContext, conversation: ConversationResource, lake: LakeResource
    ) -> dg.MaterializeResult:
        return _land_per_member(context, conversation, lake.lake(), stream, row_of)

    return per_member_asset


REFRESH_NOTE = (
    " A member is looked up again when they appear in newly landed messages; the others keep "
    "their row (`refresh_every_member` under [service.conversation] looks up all)."
)
members = _per_member_asset(
    MEMBERS,
    _member_row,
    "Members seen in the landed messages, each looked up by id (`get_member_by_id`)."
    + REFRESH_NOTE,
)
assignments = _per_member_asset(
    ASSIGNMENTS,
    _assignment_row,
    "The assignment of each member seen in the landed messages (`get_member_assignment`)."
    + REFRESH_NOTE,
)


def _matches_members_seen(stream: Stream) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=_key(stream.name), name="matches_members_in_messages", blocking=False)
    def matches_members_in_messages(
        conversation: ConversationResource, lake: LakeResource
    ) -> dg.AssetCheckResult:
        """One row per distinct member of the connection's landed messages."""
        store = lake.lake()
        landed, seen = {}, {}
        for connection in conversation.connections:
            path = store.path(stream, connection.name)
            landed[connection.name] = pq.ParquetFile(path).metadata.num_rows if path.exists() else 0
            seen[connection.name] = _count_members_seen(store, connection.name)
        return dg.AssetCheckResult(
            passed=landed == seen, metadata={"rows": landed, "members_in_messages": seen}
        )

    return matches_members_in_messages


ASSETS = [channels, teams, users, messages, members, assignments]
CHECKS = [
    *(unique_ids_check(stream, _key(stream.name)) for stream in STREAMS),
    rows_match_backup,
    _matches_members_seen(MEMBERS),
    _matches_members_seen(ASSIGNMENTS),
]
