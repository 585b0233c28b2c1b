"""Members and assignments: looked up by id, for the (channel, member) pairs seen in the
landed messages; the service offers no list of them.

Each connection's snapshot is rebuilt on every pull, but only the members of the message
files written since the last snapshot are looked up again (`plan_members`), and only those
files are read; the others keep their row from the last snapshot.
"""

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePosixPath

import duckdb
import pyarrow as pa

from pipelines.clients.conversation import (
    Assignment,
    AssignmentRelationship,
    ConversationClient,
    ConversationService,
    Member,
)
from pipelines.lake import Lake
from pipelines.lake.schemas import arrow_fields, model_row
from pipelines.pull.landing import PulledStream, Turn
from pipelines.stream import Stream, connection_schema, described
from pipelines.streams.conversation.backups import MESSAGES
from pipelines.transport import ServiceError

#: Members looked up per batch of the ones seen in messages: bounds what is in flight.
MEMBER_BATCH = 1000
MEMBERS_SEEN = "SELECT DISTINCT channel_id, member_id FROM read_parquet($files)"
#: Snapshot metadata: the newest message file (mtime, ns) whose members the snapshot holds.
MESSAGES_THROUGH = "messages_through_ns"

#: One row of a per-member stream: `row_of(client, channel_id, member_id)`.
RowOf = Callable[[ConversationClient, int, int], dict]


def message_files(lake: Lake, connection: str) -> dict[str, int]:
    """The connection's message files, as DuckDB names them, and when each was last
    written (ns): one listing, no file read."""
    name = f"{connection}.parquet"
    return {
        lake.uri(path): written
        for path, written in lake.written(MESSAGES).items()
        if PurePosixPath(path).name == name
    }


@dataclass
class MemberPlan:
    """One connection's members snapshot: whom to look up, whose rows to keep as they are
    (SQL over the temporary table `due` that `plan_members` made in `con`)."""

    con: duckdb.DuckDBPyConnection
    lookups_sql: str
    kept_sql: str | None

    def kept(self, batch_rows: int = MEMBER_BATCH) -> Iterator[pa.Table]:
        """The last snapshot's rows that stay, without `connection`, a batch at a time."""
        if self.kept_sql is None:
            return
        for batch in self.con.sql(self.kept_sql).to_arrow_reader(batch_rows):
            yield pa.Table.from_batches([batch])

    def lookups(self, batch_rows: int = MEMBER_BATCH) -> Iterator[list[tuple[int, int]]]:
        """The (channel_id, member_id) pairs to look up, in order, a batch at a time."""
        pending = self.con.execute(self.lookups_sql)
        while batch := pending.fetchmany(batch_rows):
            yield batch


@contextmanager
def plan_members(
    lake: Lake, stream: Stream, connection: str, everyone: bool, files: dict[str, int]
) -> Iterator[MemberPlan]:
    """Who is due a lookup among the connection's message `files` (`message_files`): the
    members of those written since the previous snapshot (its `MESSAGES_THROUGH`); everyone
    else in that snapshot keeps their row. Only the files written since are read, so a pull
    costs what landed since the last one, not the history: none when nothing did.
    `everyone` (or no snapshot, or one without the marker) reads every file and looks up
    every member seen. What is due is one table (`due`), so another reason to look a known
    member up again adds rows to it and the rest follows."""
    with lake.connect(spill=True) as con:
        snapshot = lake.path(stream, connection)
        previous = (
            lake.read_metadata(snapshot).get(MESSAGES_THROUGH) if lake.exists(snapshot) else None
        )
        if everyone or previous is None:
            _distinct_members(con, list(files))
            yield MemberPlan(con, "SELECT * FROM due ORDER BY ALL", None)
            return
        _distinct_members(con, [path for path, mtime in files.items() if mtime > int(previous)])
        member_id = stream.key[1]
        yield MemberPlan(
            con,
            lookups_sql="SELECT * FROM due ORDER BY ALL",
            kept_sql=f"""
                SELECT previous.* EXCLUDE (connection)
                FROM read_parquet('{_quoted(lake.uri(snapshot))}') AS previous
                ANTI JOIN due
                ON previous.channel_id = due.channel_id AND previous.{member_id} = due.member_id
            """,
        )


def _quoted(path: str) -> str:
    return path.replace("'", "''")


def _distinct_members(con: duckdb.DuckDBPyConnection, files: list[str]) -> None:
    """The temporary table `due`: the distinct (channel_id, member_id) of message files."""
    if files:
        con.execute(f"CREATE TEMP TABLE due AS {MEMBERS_SEEN}", {"files": files})
    else:
        con.execute("CREATE TEMP TABLE due (channel_id BIGINT, member_id BIGINT)")


def looked_up(turn: Turn, row_of: RowOf) -> Iterator[dict | pa.Table]:
    """One connection's rows of a per-member stream: the ones `plan_members` keeps, then
    `row_of(client, channel_id, member_id)` for the members it picks, on a small thread pool
    over the connection's transport. A member the service no longer knows (404) is skipped
    and counted. The file's metadata names the message files its members are from, taken
    before the plan reads them: a file landed in between is looked up again next time,
    never missed."""
    files = message_files(turn.lake, turn.connection.name)
    turn.file_metadata[MESSAGES_THROUGH] = str(max(files.values(), default=0))
    return _looked_up(turn, row_of, files)


def _looked_up(turn: Turn, row_of: RowOf, files: dict[str, int]) -> Iterator[dict | pa.Table]:
    client, service = turn.client, turn.service
    figures = Counter(looked_up=0, kept_from_last_snapshot=0, not_found=0)

    def lookup(pair: tuple[int, int]) -> dict | None:
        try:
            return row_of(client, *pair)
        except ServiceError as error:
            if error.status != 404:
                raise
            return None

    everyone = service.refresh_every_member
    with plan_members(turn.lake, turn.stream, turn.connection.name, everyone, files) as plan:
        for table in plan.kept():
            figures["kept_from_last_snapshot"] += table.num_rows
            yield table
        with ThreadPoolExecutor(service.member_workers) as pool:
            for batch in plan.lookups():
                figures["looked_up"] += len(batch)
                found = [row for row in pool.map(lookup, batch) if row is not None]
                figures["not_found"] += len(batch) - len(found)
                yield from found
    for figure, value in figures.items():
        turn.report(figure, value)
    if figures["not_found"]:
        turn.warn(
            f"{figures['not_found']} member(s) seen in messages but unknown to the service "
            "(404), skipped"
        )


REFRESH_NOTE = (
    " A member is looked up again when they appear in newly landed messages; the others keep "
    "their row (`refresh_every_member` under [service.conversation] looks up all)."
)


def member_row(client: ConversationClient, channel_id: int, member_id: int) -> dict:
    member = client.get_member_by_id(channel_id, member_id)
    return {**model_row(member, MEMBERS.schema), "channel_id": channel_id}


def member_rows(turn: Turn) -> Iterator[dict | pa.Table]:
    return looked_up(turn, member_row)


MEMBERS = PulledStream(
    ConversationService.service,
    "members",
    connection_schema(
        [
            described(
                "channel_id",
                pa.int64(),
                "The channel the member was looked up in (a channel's `id`).",
            ),
            *arrow_fields(Member),
        ]
    ),
    # The lookup takes the channel with the id: key on both.
    key=("channel_id", "id"),
    rows=member_rows,
    description=(
        "Members seen in the landed messages, each looked up by id (`get_member_by_id`)."
        + REFRESH_NOTE
    ),
    upstream=("messages",),
)


def assignment_row(client: ConversationClient, channel_id: int, member_id: int) -> dict:
    assignment = client.get_member_assignment(channel_id, member_id)
    relationship = assignment.assignment_relationship
    return {
        "channel_id": channel_id,
        "member_id": member_id,
        **model_row(assignment, ASSIGNMENTS.schema),
        # Its drift is in the assignment's `_extra` (`assignment_relationship.<field>`).
        **(model_row(relationship, ASSIGNMENTS.schema, extra=False) if relationship else {}),
    }


def assignment_rows(turn: Turn) -> Iterator[dict | pa.Table]:
    return looked_up(turn, assignment_row)


ASSIGNMENTS = PulledStream(
    ConversationService.service,
    "assignments",
    # The member looked up, then its assignment with the relationship's ids as columns.
    connection_schema(
        [
            described(
                "channel_id",
                pa.int64(),
                "The channel the member was looked up in (a channel's `id`).",
            ),
            described("member_id", pa.int64(), "The member (a member's `id`)."),
            *arrow_fields(Assignment, exclude=("assignment_relationship",)),
            *arrow_fields(AssignmentRelationship),
        ]
    ),
    key=("channel_id", "member_id"),
    rows=assignment_rows,
    description=(
        "The assignment of each member seen in the landed messages (`get_member_assignment`)."
        + REFRESH_NOTE
    ),
    upstream=("messages",),
)
