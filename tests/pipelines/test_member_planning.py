"""Which members a pull looks up again, on a lake written by hand: no service, no Dagster.
For messages landed since, for the push's writes since, and in rotation."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime, timedelta

import pyarrow.parquet as pq
import pytest

from pipelines.clients.base import Connection
from pipelines.clients.conversation import ConversationService
from pipelines.lake import Lake
from pipelines.pull.landing import Pull, Turn
from pipelines.pull.outcome import Landed
from pipelines.stream import Stream
from pipelines.streams.conversation import ASSIGNMENTS, MEMBERS, MESSAGES
from pipelines.streams.conversation import members as planning
from pipelines.streams.conversation.checks import members_match_messages
from pipelines.streams.conversation.members import (
    MESSAGES_THROUGH,
    PUSHED_THROUGH,
    listed,
    looked_up,
    plan_members,
)
from pipelines.streams.pushed import PUSHED
from pipelines.transport import ServiceError

REGION = "default"
OLD_DAY, NEW_DAY = date(2026, 1, 1), date(2026, 1, 2)
#: Message files' modification times (ns): the snapshot was taken between the two.
OLD_NS, SNAPSHOT_NS, NEW_NS = 1_000_000_000, 2_000_000_000, 3_000_000_000


def _messages(lake: Lake, day: date, pairs: list[tuple[int, int]], mtime_ns: int) -> None:
    rows = [
        {"connection": REGION, "message_uuid": f"{day}-{n}", "channel_id": c, "member_id": m}
        for n, (c, m) in enumerate(pairs)
    ]
    lake.write(MESSAGES, REGION, rows, day=day)
    os.utime(lake.path(MESSAGES, REGION, day), ns=(mtime_ns, mtime_ns))


#: When the hand-written snapshots' rows were looked up, unless a test says otherwise.
LOOKED_UP = datetime(2026, 1, 2, 12, tzinfo=UTC)


def _snapshot(
    lake: Lake,
    stream: Stream,
    pairs: list[tuple[int, int]],
    through: int | None,
    looked_up_at: dict[tuple[int, int], datetime] | None = None,
    pushed_through: int = 0,
):
    member_id = stream.key[1]
    rows = [
        {
            "connection": REGION,
            "channel_id": c,
            member_id: m,
            "looked_up_at": (looked_up_at or {}).get((c, m), LOOKED_UP),
        }
        for c, m in pairs
    ]
    metadata = (
        {}
        if through is None
        else {MESSAGES_THROUGH: str(through), PUSHED_THROUGH: str(pushed_through)}
    )
    lake.write(stream, REGION, rows, metadata=metadata)


def _plan(
    lake: Lake, stream: Stream, everyone: bool = False, refresh_pulls: int = 0
) -> tuple[list, list]:
    """(pairs looked up, pairs whose row is kept), in order."""
    member_id = stream.key[1]
    files = listed(lake, REGION)
    with plan_members(lake, stream, REGION, files, everyone, refresh_pulls) as plan:
        kept = [
            (row["channel_id"], row[member_id])
            for table in plan.kept(batch_rows=1)
            for row in table.to_pylist()
        ]
        lookups = [pair for batch in plan.lookups(batch_rows=1) for pair in batch]
    return lookups, sorted(kept)


@pytest.fixture
def lake(tmp_path) -> Lake:
    """(1, 10) wrote only before the snapshot; (1, 11) before and after; (2, 20) after."""
    lake = Lake(tmp_path)
    _messages(lake, OLD_DAY, [(1, 10), (1, 11), (1, 10)], OLD_NS)
    _messages(lake, NEW_DAY, [(1, 11), (2, 20)], NEW_NS)
    return lake


@pytest.mark.parametrize("stream", [MEMBERS, ASSIGNMENTS], ids=lambda s: s.name)
def test_only_members_of_messages_newer_than_the_snapshot_are_looked_up(lake, stream):
    _snapshot(lake, stream, [(1, 10), (1, 11)], through=SNAPSHOT_NS)
    lookups, kept = _plan(lake, stream)
    assert lookups == [(1, 11), (2, 20)]
    assert kept == [(1, 10)]


def test_without_new_messages_nobody_is_looked_up(lake):
    _snapshot(lake, MEMBERS, [(1, 10), (1, 11), (2, 20)], through=NEW_NS)
    lookups, kept = _plan(lake, MEMBERS)
    assert lookups == []
    assert kept == [(1, 10), (1, 11), (2, 20)]


def test_a_member_missing_from_the_snapshot_waits_for_new_messages(lake):
    """A member the last pull could not look up (a 404) is asked for again when they
    appear in newly landed messages, not at every pull: finding them would read every
    message file."""
    _snapshot(lake, MEMBERS, [(1, 10), (2, 20)], through=NEW_NS)
    assert _plan(lake, MEMBERS) == ([], [(1, 10), (2, 20)])
    _messages(lake, date(2026, 1, 3), [(1, 11)], NEW_NS + 1)
    assert _plan(lake, MEMBERS) == ([(1, 11)], [(1, 10), (2, 20)])


@pytest.mark.parametrize("history_days", [3, 60])
def test_a_pull_reads_only_the_message_files_written_since_the_snapshot(
    tmp_path, monkeypatch, history_days
):
    """The message files a plan reads, and their rows, are those of the day landed since
    the last snapshot, however long the history: 1 file of 2 rows after 3 days as after 60."""
    lake = Lake(tmp_path)
    first = date(2026, 1, 1)
    for n in range(history_days):
        day = date.fromordinal(first.toordinal() + n)
        _messages(lake, day, [(1, 10 + n), (1, 10 + n + 1)], OLD_NS)
    known = [(1, 10 + n) for n in range(history_days + 1)]
    _snapshot(lake, MEMBERS, known, through=SNAPSHOT_NS)
    _messages(lake, date(2026, 6, 1), [(1, 10), (3, 30)], NEW_NS)
    read: list[str] = []
    distinct = planning._distinct_members
    monkeypatch.setattr(
        planning, "_distinct_members", lambda con, files: (read.extend(files), distinct(con, files))
    )
    lookups, kept = _plan(lake, MEMBERS)
    assert lookups == [(1, 10), (3, 30)]
    assert len(kept) == len(known) - 1
    rows = sum(pq.read_metadata(file).num_rows for file in read)
    assert (len(read), rows) == (1, 2)


def test_refresh_every_member_looks_everyone_up(lake):
    _snapshot(lake, MEMBERS, [(1, 10), (1, 11), (2, 20)], through=NEW_NS)
    lookups, kept = _plan(lake, MEMBERS, everyone=True)
    assert lookups == [(1, 10), (1, 11), (2, 20)]
    assert kept == []


@pytest.mark.parametrize(
    "snapshot", [None, {}, {MESSAGES_THROUGH: str(NEW_NS)}], ids=["first-run", "unmarked", "old"]
)
def test_a_first_run_or_a_snapshot_without_the_markers_looks_everyone_up(lake, snapshot):
    """A snapshot written before `looked_up_at` and the ledger's marker (only its messages
    marked) is looked up whole once, as one without any marker."""
    if snapshot is not None:
        row = {"connection": REGION, "channel_id": 1, "id": 10}
        lake.write(MEMBERS, REGION, [row], metadata=snapshot)
    lookups, kept = _plan(lake, MEMBERS)
    assert lookups == [(1, 10), (1, 11), (2, 20)]
    assert kept == []


def test_no_messages_no_lookups(tmp_path):
    assert _plan(Lake(tmp_path), MEMBERS) == ([], [])


def test_lookups_keep_rows_skip_unknown_members_and_mark_the_snapshot(lake):
    """The rows of a pull: kept ones first, then the looked-up ones; a 404 is counted, not
    landed; the snapshot is marked with the newest message file it saw."""
    _snapshot(lake, MEMBERS, [(1, 10), (1, 11)], through=SNAPSHOT_NS)
    service = ConversationService(connections=[], member_workers=2, member_refresh_pulls=0)
    connection = Connection(name=REGION, base_url="http://unused", api_key="unused")

    def row_of(client, channel_id: int, member_id: int) -> dict:
        if member_id == 20:
            raise ServiceError("GET", f"/members/{member_id}", 404, {})
        return {"channel_id": channel_id, "id": member_id, "name": "looked up"}

    turn, warnings = _turn(service, lake, connection)
    before = datetime.now(UTC)
    rows = list(looked_up(turn, row_of))
    assert turn.file_metadata == {MESSAGES_THROUGH: str(NEW_NS), PUSHED_THROUGH: "0"}
    assert [row.num_rows for row in rows[:1]] == [1]  # (1, 10), from the last snapshot
    [row] = rows[1:]
    stamp = row.pop("looked_up_at")
    assert row == {"channel_id": 1, "id": 11, "name": "looked up"}
    assert before <= stamp <= datetime.now(UTC)
    assert turn.landed.figures == {
        "looked_up": {REGION: 2},
        "kept_from_last_snapshot": {REGION: 1},
        "not_found": {REGION: 1},
        "looked_up_for_messages": {REGION: 2},
        "looked_up_after_push": {REGION: 0},
        "looked_up_in_rotation": {REGION: 0},
    }
    assert warnings == [
        f"conversation.members [{REGION}]: 1 member(s) seen in messages but unknown to the "
        "service (404), skipped"
    ]


def _turn(service, lake: Lake, connection: Connection) -> tuple[Turn, list[str]]:
    """One connection's turn of a members pull, its client over no transport."""
    warnings: list[str] = []
    pull = Pull(service, lake, MEMBERS, print, warnings.append)
    return Turn(pull, connection, None, Landed()), warnings


def test_lookups_fail_on_any_other_service_error(lake):
    service = ConversationService(connections=[])
    connection = Connection(name=REGION, base_url="http://unused", api_key="unused")

    def row_of(client, channel_id: int, member_id: int) -> dict:
        raise ServiceError("GET", f"/members/{member_id}", 500, {})

    with pytest.raises(ServiceError, match="answered 500"):
        list(looked_up(_turn(service, lake, connection)[0], row_of))


def test_members_match_messages_counts_distinct_members_per_connection(lake):
    _snapshot(lake, MEMBERS, [(1, 10), (1, 11), (2, 20)], through=NEW_NS)
    verdict = members_match_messages(lake, MEMBERS, [REGION])
    assert verdict.passed
    assert verdict.figures["members_missing"] == {REGION: 0}
    assert verdict.figures["members_in_no_message"] == {REGION: 0}
    # A snapshot that lost a member of the messages it covers, and holds one of none.
    _snapshot(lake, ASSIGNMENTS, [(1, 10), (3, 30)], through=NEW_NS)
    wrong = members_match_messages(lake, ASSIGNMENTS, [REGION])
    assert not wrong.passed
    assert wrong.figures["members_missing"] == {REGION: 2}
    assert wrong.figures["members_in_no_message"] == {REGION: 1}


def test_members_of_messages_landed_after_the_snapshot_are_not_missing(lake):
    """Messages landed after the members were looked up made the check fail on a healthy
    lake: their members are the next pull's, so only the files before it are required."""
    _snapshot(lake, MEMBERS, [(1, 10), (1, 11)], through=SNAPSHOT_NS)
    verdict = members_match_messages(lake, MEMBERS, [REGION])
    assert verdict.passed
    assert verdict.figures["message_files_landed_since"] == {REGION: 1}


def test_members_match_messages_compares_nothing_without_a_snapshot(lake):
    verdict = members_match_messages(lake, MEMBERS, [REGION])
    assert not verdict.passed
    assert verdict.nothing_compared == f"{REGION}: conversation.members not landed"


def _pushed(lake: Lake, name: str, rows: list[dict], mtime_ns: int | None = None) -> None:
    """A file of the push ledger (`sync.pushed`), as a push's journal leaves it."""
    lake.write(PUSHED, name, rows)
    if mtime_ns is not None:
        os.utime(lake.path(PUSHED, name), ns=(mtime_ns, mtime_ns))


def _write(
    channel_id: int,
    member_id: int,
    after: timedelta,
    record_type: str = "conversation_assignment",
    state: str = "accepted",
    connection: str = REGION,
) -> dict:
    """A ledger row of the push's write to a member, `after` the snapshot's lookups."""
    key = f"{connection}:{channel_id}:{member_id}"
    if record_type == "conversation_close":
        key += ":2026-01-02 13:00:00+00"
    return {
        "record_type": record_type,
        "key": key,
        "state": state,
        "connection": connection,
        "pushed_at": LOOKED_UP + after,
    }


def test_members_the_push_wrote_since_their_lookup_are_due(lake):
    """An accepted assignment or close of this connection, after the member's lookup, makes
    the member due; a write before it, one not accepted, another connection's, another
    record type's or one to a member the snapshot does not hold does not."""
    _snapshot(lake, ASSIGNMENTS, [(1, 10), (1, 11), (2, 20)], through=NEW_NS)
    later, earlier = timedelta(minutes=5), timedelta(minutes=-5)
    _pushed(
        lake,
        "journal-1",
        [
            _write(1, 10, later),
            _write(2, 20, later, record_type="conversation_close"),
            _write(1, 11, earlier),
            _write(1, 11, later, state="sending"),
            _write(1, 11, later, connection="jp"),
            _write(1, 11, later, record_type="order"),
            _write(3, 30, later),
        ],
    )
    files = listed(lake, REGION)
    with plan_members(lake, ASSIGNMENTS, REGION, files) as plan:
        assert [pair for batch in plan.lookups() for pair in batch] == [(1, 10), (2, 20)]
        assert plan.reasons() == {"messages": 0, "pushed": 2, "rotation": 0}
        kept = [row["member_id"] for table in plan.kept() for row in table.to_pylist()]
    assert kept == [11]


def test_only_ledger_files_written_since_the_last_look_are_read(lake):
    """A ledger file the last pull saw (written before its `PUSHED_THROUGH`) made its
    members due then; one of the same second is read again (an object store keeps whole
    seconds), and a write in it older than the lookup is not due."""
    _snapshot(
        lake,
        MEMBERS,
        [(1, 10), (1, 11), (2, 20)],
        through=NEW_NS,
        looked_up_at={(1, 11): LOOKED_UP + timedelta(hours=1)},
        pushed_through=SNAPSHOT_NS,
    )
    _pushed(lake, "journal-1", [_write(1, 10, timedelta(minutes=5))], mtime_ns=OLD_NS)
    _pushed(lake, "journal-2", [_write(1, 11, timedelta(minutes=5))], mtime_ns=SNAPSHOT_NS)
    _pushed(lake, "journal-3", [_write(2, 20, timedelta(minutes=5))], mtime_ns=NEW_NS)
    assert _plan(lake, MEMBERS) == ([(2, 20)], [(1, 10), (1, 11)])


def test_a_rolling_share_looks_up_those_looked_up_longest_ago(lake):
    """With 4 pulls to go round, a pull looks up a quarter of the known members (rounded
    up), the oldest lookups first, besides those due for their messages."""
    known = [(1, m) for m in range(10, 20)]
    oldest_first = [(1, 15), (1, 12), (1, 19)]
    looked_up_at = {pair: LOOKED_UP - timedelta(hours=3 - n) for n, pair in enumerate(oldest_first)}
    _snapshot(lake, MEMBERS, known, through=SNAPSHOT_NS, looked_up_at=looked_up_at)
    lookups, kept = _plan(lake, MEMBERS, refresh_pulls=4)
    # (1, 11) and (2, 20) for their new messages; ceil(10 / 4) = 3 in rotation.
    assert lookups == sorted([(1, 11), (2, 20), *oldest_first])
    assert kept == sorted(set(known) - {(1, 11), *oldest_first})


def test_every_known_member_is_looked_up_within_the_refresh_pulls(tmp_path):
    """Pull after pull with nothing new, each known member is looked up again within
    `refresh_pulls` pulls, a share each time, and the round starts again after."""
    lake = Lake(tmp_path)
    _messages(lake, OLD_DAY, [(1, m) for m in range(10, 21)], OLD_NS)
    known = [(1, m) for m in range(10, 21)]
    stamps = {pair: LOOKED_UP for pair in known}
    rounds: list[list[tuple[int, int]]] = []
    for pull in range(5):
        _snapshot(lake, MEMBERS, known, through=OLD_NS, looked_up_at=stamps)
        lookups, _ = _plan(lake, MEMBERS, refresh_pulls=4)
        rounds.append(lookups)
        stamps |= {pair: LOOKED_UP + timedelta(hours=pull + 1) for pair in lookups}
    assert [len(lookups) for lookups in rounds] == [3, 3, 3, 3, 3]  # ceil(11 / 4)
    assert set().union(*rounds[:4]) == set(known)
    assert set(rounds[4]) <= set(rounds[0]) | set(rounds[1])  # the oldest again
