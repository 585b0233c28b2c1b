"""Which members a pull looks up again, on a lake written by hand: no service, no Dagster."""

from __future__ import annotations

import os
from datetime import date

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
    looked_up,
    message_files,
    plan_members,
)
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


def _snapshot(lake: Lake, stream: Stream, pairs: list[tuple[int, int]], through: int | None):
    member_id = stream.key[1]
    rows = [{"connection": REGION, "channel_id": c, member_id: m} for c, m in pairs]
    metadata = {} if through is None else {MESSAGES_THROUGH: str(through)}
    lake.write(stream, REGION, rows, metadata=metadata)


def _plan(lake: Lake, stream: Stream, everyone: bool = False) -> tuple[list, list]:
    """(pairs looked up, pairs whose row is kept), in order."""
    member_id = stream.key[1]
    with plan_members(lake, stream, REGION, everyone, message_files(lake, REGION)) as plan:
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


@pytest.mark.parametrize("unmarked_snapshot", [False, True], ids=["first-run", "unmarked"])
def test_a_first_run_or_an_unmarked_snapshot_looks_everyone_up(lake, unmarked_snapshot):
    if unmarked_snapshot:
        _snapshot(lake, MEMBERS, [(1, 10)], through=None)
    lookups, kept = _plan(lake, MEMBERS)
    assert lookups == [(1, 10), (1, 11), (2, 20)]
    assert kept == []


def test_no_messages_no_lookups(tmp_path):
    assert _plan(Lake(tmp_path), MEMBERS) == ([], [])


def test_lookups_keep_rows_skip_unknown_members_and_mark_the_snapshot(lake):
    """The rows of a pull: kept ones first, then the looked-up ones; a 404 is counted, not
    landed; the snapshot is marked with the newest message file it saw."""
    _snapshot(lake, MEMBERS, [(1, 10), (1, 11)], through=SNAPSHOT_NS)
    service = ConversationService(connections=[], member_workers=2)
    connection = Connection(name=REGION, base_url="http://unused", api_key="unused")

    def row_of(client, channel_id: int, member_id: int) -> dict:
        if member_id == 20:
            raise ServiceError("GET", f"/members/{member_id}", 404, {})
        return {"channel_id": channel_id, "id": member_id, "name": "looked up"}

    turn, warnings = _turn(service, lake, connection)
    rows = list(looked_up(turn, row_of))
    assert turn.file_metadata == {MESSAGES_THROUGH: str(NEW_NS)}
    assert [row.num_rows for row in rows[:1]] == [1]  # (1, 10), from the last snapshot
    assert rows[1:] == [{"channel_id": 1, "id": 11, "name": "looked up"}]
    assert turn.landed.figures == {
        "looked_up": {REGION: 2},
        "kept_from_last_snapshot": {REGION: 1},
        "not_found": {REGION: 1},
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
