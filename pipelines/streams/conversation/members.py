"""Members and assignments: looked up by id, for the (channel, member) pairs seen in the
landed messages; the service offers no list of them.

Each connection's snapshot is rebuilt on every pull; who is looked up again is one table,
`due` (`plan_members`): the members of the message files written since the last snapshot,
the members the push wrote to since their last lookup (`sync.pushed`), and a rolling share
of the others, those looked up longest ago (`member_refresh_pulls`). Only the message and
ledger files written since are read; everyone else keeps their row, with its
`looked_up_at`.
"""

import math
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
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
from pipelines.stream import TIMESTAMP, Stream, connection_schema, described
from pipelines.streams.conversation.backups import MESSAGES
from pipelines.streams.pushed import PUSHED
from pipelines.transport import ServiceError

#: Members looked up per batch of the ones due: bounds what is in flight.
MEMBER_BATCH = 1000
MEMBERS_SEEN = "SELECT DISTINCT channel_id, member_id FROM read_parquet($files)"
#: Snapshot metadata: the newest message file (mtime, ns) whose members the snapshot holds.
MESSAGES_THROUGH = "messages_through_ns"
#: Snapshot metadata: the newest file of the push ledger (mtime, ns) the snapshot has read.
PUSHED_THROUGH = "pushed_through_ns"
#: Why a member is due a lookup, and the figure that counts them.
REASONS = {
    "messages": "looked_up_for_messages",
    "pushed": "looked_up_after_push",
    "rotation": "looked_up_in_rotation",
}
#: The push's writes that change what a lookup answers (`OUTBOUND` in
#: `pipelines/push/plan.py`); their ledger key is `<connection>:<channel_id>:<member_id>`,
#: a close's followed by `:<closed_at>`.
PUSHED_WRITES = ("conversation_assignment", "conversation_close")

#: One row of a per-member stream: `row_of(client, channel_id, member_id)`.
RowOf = Callable[[ConversationClient, int, int], dict]

LOOKED_UP_AT = described(
    "looked_up_at",
    TIMESTAMP,
    "When the row was looked up at the service, in UTC (the start of the pull's lookups, "
    "after it read who was due): the row is as the service held it then. Every member is "
    "looked up again at least once in `member_refresh_pulls` pulls (24 by default).",
)


@dataclass(frozen=True)
class Listed:
    """What one listing found for a connection, as DuckDB names the files, with when each
    was last written (ns): its message files and the push ledger's files. No file read."""

    messages: dict[str, int]
    pushed: dict[str, int]


def listed(lake: Lake, connection: str) -> Listed:
    name = f"{connection}.parquet"
    return Listed(
        messages={
            lake.uri(path): written
            for path, written in lake.written(MESSAGES).items()
            if PurePosixPath(path).name == name
        },
        pushed={lake.uri(path): written for path, written in lake.written(PUSHED).items()},
    )


@dataclass
class MemberPlan:
    """One connection's members snapshot: whom to look up, whose rows to keep as they are
    (SQL over the temporary table `due` that `plan_members` made in `con`), and how many
    are due for each reason (`REASONS`)."""

    con: duckdb.DuckDBPyConnection
    kept_sql: str | None

    def kept(self, batch_rows: int = MEMBER_BATCH) -> Iterator[pa.Table]:
        """The last snapshot's rows that stay, without `connection`, a batch at a time."""
        if self.kept_sql is None:
            return
        for batch in self.con.sql(self.kept_sql).to_arrow_reader(batch_rows):
            yield pa.Table.from_batches([batch])

    def lookups(self, batch_rows: int = MEMBER_BATCH) -> Iterator[list[tuple[int, int]]]:
        """The (channel_id, member_id) pairs to look up, in order, a batch at a time."""
        pending = self.con.execute("SELECT channel_id, member_id FROM due ORDER BY 1, 2")
        while batch := pending.fetchmany(batch_rows):
            yield batch

    def reasons(self) -> dict[str, int]:
        """How many are due for each reason (`REASONS`), zeros included."""
        counted = dict(self.con.execute("SELECT reason, count(*) FROM due GROUP BY 1").fetchall())
        return {reason: counted.get(reason, 0) for reason in REASONS}


@contextmanager
def plan_members(
    lake: Lake,
    stream: Stream,
    connection: str,
    files: Listed,
    everyone: bool = False,
    refresh_pulls: int = 0,
) -> Iterator[MemberPlan]:
    """Who is due a lookup (`due`, one row per member, with its reason): the members of the
    message files written since the previous snapshot (its `MESSAGES_THROUGH`); the known
    members with an accepted write of the push after their `looked_up_at`, read from the
    ledger's files written since (its `PUSHED_THROUGH`); and of the other known members the
    1/`refresh_pulls` looked up longest ago, so each is looked up again within that many
    pulls (0: none). Everyone else in that snapshot keeps their row. `everyone` (or no
    snapshot, or one from before these markers) reads every message file and looks up every
    member seen."""
    with lake.connect(spill=True) as con:
        snapshot = lake.path(stream, connection)
        previous = lake.read_metadata(snapshot) if lake.exists(snapshot) else {}
        if everyone or not {MESSAGES_THROUGH, PUSHED_THROUGH} <= previous.keys():
            _distinct_members(con, list(files.messages))
            yield MemberPlan(con, None)
            return
        since = int(previous[MESSAGES_THROUGH])
        _distinct_members(con, [path for path, ns in files.messages.items() if ns > since])
        known = f"read_parquet('{_quoted(lake.uri(snapshot))}')"
        member_id = stream.key[1]
        # An object store keeps whole seconds: a ledger file of the same second as the last
        # look is read again, and its rows already looked up after are not due.
        ledger = [path for path, ns in files.pushed.items() if ns >= int(previous[PUSHED_THROUGH])]
        if ledger:
            con.execute(
                f"""
                INSERT INTO due
                SELECT DISTINCT known.channel_id, known.{member_id}, 'pushed'
                FROM read_parquet($ledger, union_by_name = true) AS pushed
                JOIN {known} AS known
                ON known.channel_id = try_cast(split_part(pushed.key, ':', 2) AS BIGINT)
                AND known.{member_id} = try_cast(split_part(pushed.key, ':', 3) AS BIGINT)
                WHERE pushed.record_type IN $writes AND pushed.state = 'accepted'
                AND pushed.connection = $connection
                AND pushed.pushed_at > known.looked_up_at
                AND NOT EXISTS (
                    SELECT 1 FROM due
                    WHERE due.channel_id = known.channel_id AND due.member_id = known.{member_id}
                )
                """,
                {"ledger": ledger, "writes": list(PUSHED_WRITES), "connection": connection},
            )
        if refresh_pulls:
            share = math.ceil(lake.footer(snapshot).num_rows / refresh_pulls)
            con.execute(
                f"""
                INSERT INTO due
                SELECT known.channel_id, known.{member_id}, 'rotation'
                FROM {known} AS known
                ANTI JOIN due
                ON known.channel_id = due.channel_id AND known.{member_id} = due.member_id
                ORDER BY known.looked_up_at, known.channel_id, known.{member_id}
                LIMIT $share
                """,
                {"share": share},
            )
        yield MemberPlan(
            con,
            kept_sql=f"""
                SELECT known.* EXCLUDE (connection)
                FROM {known} AS known
                ANTI JOIN due
                ON known.channel_id = due.channel_id AND known.{member_id} = due.member_id
            """,
        )


def _quoted(path: str) -> str:
    return path.replace("'", "''")


def _distinct_members(con: duckdb.DuckDBPyConnection, files: list[str]) -> None:
    """The temporary table `due`: the distinct (channel_id, member_id) of message files,
    due for their messages."""
    if files:
        seen = f"SELECT *, 'messages' AS reason FROM ({MEMBERS_SEEN})"
        con.execute(f"CREATE TEMP TABLE due AS {seen}", {"files": files})
    else:
        con.execute("CREATE TEMP TABLE due (channel_id BIGINT, member_id BIGINT, reason VARCHAR)")


def looked_up(turn: Turn, row_of: RowOf) -> Iterator[dict | pa.Table]:
    """One connection's rows of a per-member stream: the ones `plan_members` keeps, then
    `row_of(client, channel_id, member_id)` for the members it picks, on a small thread pool
    over the connection's transport, each stamped `looked_up_at`. A member the service no
    longer knows (404) is skipped and counted. The file's metadata names the message and
    ledger files the plan saw, listed before it reads them: a file written in between is
    read next time, never missed."""
    files = listed(turn.lake, turn.connection.name)
    turn.file_metadata[MESSAGES_THROUGH] = str(max(files.messages.values(), default=0))
    turn.file_metadata[PUSHED_THROUGH] = str(max(files.pushed.values(), default=0))
    return _looked_up(turn, row_of, files)


def _looked_up(turn: Turn, row_of: RowOf, files: Listed) -> Iterator[dict | pa.Table]:
    client, service = turn.client, turn.service
    figures = Counter(looked_up=0, kept_from_last_snapshot=0, not_found=0)
    # Taken after the listing: a write the push records later is read by the next pull and,
    # being newer than this, makes its member due.
    stamp = datetime.now(UTC)

    def lookup(pair: tuple[int, int]) -> dict | None:
        try:
            return row_of(client, *pair) | {LOOKED_UP_AT.name: stamp}
        except ServiceError as error:
            if error.status != 404:
                raise
            return None

    with plan_members(
        turn.lake,
        turn.stream,
        turn.connection.name,
        files,
        everyone=service.refresh_every_member,
        refresh_pulls=service.member_refresh_pulls,
    ) as plan:
        for reason, due in plan.reasons().items():
            figures[REASONS[reason]] = due
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
    " A member is looked up again when they appear in newly landed messages or the push wrote "
    "to them (`sync.pushed`), and every member at least once in `member_refresh_pulls` pulls "
    "(24 by default), those looked up longest ago first; `looked_up_at` says when. "
    "`refresh_every_member` under [service.conversation] looks up all at every pull."
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
            LOOKED_UP_AT,
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
    reads=(MESSAGES,),
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
            LOOKED_UP_AT,
        ]
    ),
    key=("channel_id", "member_id"),
    rows=assignment_rows,
    description=(
        "The assignment of each member seen in the landed messages (`get_member_assignment`)."
        + REFRESH_NOTE
    ),
    upstream=("messages",),
    reads=(MESSAGES,),
)
