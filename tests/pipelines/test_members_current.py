"""The warehouse's members and assignments hold what the conversation service holds, against
the sandbox's truth: after the push wrote to members, at the next sync; after an agent
reassigned members at the service without a message, within `member_refresh_pulls` syncs,
frozen and live; and a sync of members on a lake without messages says what to run."""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime, timedelta

import duckdb
import httpx
import pytest

from cli.main import main
from tests.push.test_conversation import ASSIGNMENT_COLUMNS, CLOSE_COLUMNS, write_view

REGIONS = ("default", "jp")
TYPES = ["conversation_assignment", "conversation_close"]
ASSIGNMENT = ("channel_id", "member_id", "assign_type", "team_id", "user_id")


def _sync(*streams: str) -> None:
    assert main(["sync", "--streams", *streams]) == 0


def _query(sql: str, parameters: list | None = None) -> list[tuple]:
    """What the warehouse the command line built answers, opened as an analyst would."""
    with duckdb.connect(os.environ["WAREHOUSE_PATH"], read_only=True) as con:
        return con.execute(sql, parameters).fetchall()


def _truth(sandbox, region: str) -> dict[int, tuple]:
    """Each member seen in messages: their assignment as the service holds it now."""
    url = f"{sandbox.url}/_sandbox/truth/conversation/{region}/assignments/rows"
    rows = httpx.get(url, timeout=30).json()["rows"]
    return {row["member_id"]: tuple(row[c] for c in ASSIGNMENT) for row in rows}


def _landed(region: str) -> dict[int, tuple]:
    rows = _query(
        f"SELECT {', '.join(ASSIGNMENT)} FROM conversation.assignments "
        f"WHERE connection = '{region}'"
    )
    return {row[1]: row for row in rows}


def _stale(sandbox) -> dict[str, set[int]]:
    """Per region, the members whose landed assignment differs from the service's, or who
    are on one side only."""
    stale = {}
    for region in REGIONS:
        truth, landed = _truth(sandbox, region), _landed(region)
        stale[region] = {m for m in truth.keys() | landed.keys() if truth.get(m) != landed.get(m)}
    return stale


def _looked_up_since(moment: datetime) -> dict[str, int]:
    rows = _query(
        "SELECT connection, count(*) FILTER (WHERE looked_up_at > ?) "
        "FROM conversation.assignments GROUP BY 1",
        [moment],
    )
    return dict(rows)


def test_the_sync_after_a_push_holds_what_the_push_wrote(
    start_sandbox, sync_env, tmp_path, monkeypatch
):
    """The members the push assigned or closed are looked up again by the next sync, though
    they wrote no message; with the rotation off, no one else is."""
    sandbox = start_sandbox()
    sync_env(sandbox, sync_toml="[service.conversation]\nmember_refresh_pulls = 0\n")
    _sync("conversation")
    synced = datetime.now(UTC)
    assignments, closes, written = [], [], {}
    for region in REGIONS:
        teams = [
            row[0]
            for row in _query(f"SELECT id FROM conversation.teams WHERE connection = '{region}'")
        ]
        agents = [
            row[0]
            for row in _query(
                "SELECT id FROM conversation.users WHERE status = 'active' AND type = 'human' "
                f"AND role_type <> 'owner' AND connection = '{region}' ORDER BY id"
            )
        ]
        members = _query(
            "SELECT a.channel_id, a.member_id, a.team_id, m.processing_state "
            "FROM conversation.assignments a JOIN conversation.members m "
            "ON a.connection = m.connection AND a.channel_id = m.channel_id AND a.member_id = m.id "
            f"WHERE a.connection = '{region}' ORDER BY a.member_id LIMIT 10"
        )
        written[region] = {member_id for _, member_id, _, _ in members}
        for n, (channel_id, member_id, team_id, state) in enumerate(members):
            other = next(team for team in teams if team != team_id)
            member = {"connection": region, "channel_id": channel_id, "member_id": member_id}
            assignments.append(
                member
                | {"assign_type": "permanent", "team_id": other, "user_id": agents[n % len(agents)]}
                | {"updated_at": synced}
            )
            if state != "resolved":
                closes.append(member | {"user_id": agents[0], "closed_at": synced})
    assert closes  # some members to close, so the close is what is looked up
    folder = tmp_path / "outbound_sql"
    write_view(folder, "conversation_assignments", ASSIGNMENT_COLUMNS, assignments)
    write_view(folder, "conversation_closes", CLOSE_COLUMNS, closes)
    monkeypatch.setenv("WAREHOUSE_SQL", str(folder))
    assert main(["push", "--types", *TYPES]) == 0
    stale = _stale(sandbox)
    assert stale == written  # the service holds the push's, the warehouse not yet

    pushed = datetime.now(UTC)
    _sync("conversation")
    assert _stale(sandbox) == {region: set() for region in REGIONS}
    assert _looked_up_since(pushed) == {region: len(written[region]) for region in REGIONS}
    closed = {(row["connection"], row["member_id"]) for row in closes}
    states = _query("SELECT connection, id, processing_state FROM conversation.members")
    assert {(c, m) for c, m, state in states if (c, m) in closed and state == "resolved"} == closed


def _reassign(sandbox, region: str, count: int) -> set[int]:
    answer = httpx.post(
        f"{sandbox.url}/_sandbox/conversation/{region}/members/reassign",
        params={"count": count},
        timeout=30,
    )
    answer.raise_for_status()
    return {row["member_id"] for row in answer.json()["reassigned"]}


PULLS = 3


def test_a_reassignment_at_the_service_lands_within_the_refresh_pulls(start_sandbox, sync_env):
    """An agent's reassignments without a message reach the warehouse within
    `member_refresh_pulls` syncs: each sync looks up again the share of members looked up
    longest ago (ceil(known / pulls)), so the last one has gone round them all."""
    sandbox = start_sandbox()
    sync_env(sandbox, sync_toml=f"[service.conversation]\nmember_refresh_pulls = {PULLS}\n")
    _sync("conversation")
    first = datetime.now(UTC)
    known = {region: len(_landed(region)) for region in REGIONS}
    reassigned = {region: _reassign(sandbox, region, 30) for region in REGIONS}
    assert _stale(sandbox) == reassigned
    for pull in range(1, PULLS + 1):
        _sync("conversation.assignments")
        share = {r: min(known[r], pull * math.ceil(known[r] / PULLS)) for r in REGIONS}
        assert _looked_up_since(first) == share
    assert _stale(sandbox) == {region: set() for region in REGIONS}


def test_a_reassignment_lands_within_the_refresh_pulls_with_the_sandbox_live(
    start_sandbox, sync_env
):
    """The same with the service's clock moving: new messages arrive between the syncs (so
    new members are looked up too), and after `member_refresh_pulls` syncs the warehouse
    equals the service, reassigned members included."""
    # One message every 5 minutes per region; anchored 40 minutes back, so the clock moved
    # 30 minutes by the tests stays within the pipeline's yesterday and today.
    sandbox = start_sandbox(
        frozen=False,
        now=datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=40),
        arrivals_per_minute=0.2,
    )
    sync_env(sandbox, sync_toml=f"[service.conversation]\nmember_refresh_pulls = {PULLS}\n")
    _sync("conversation")
    reassigned = {region: _reassign(sandbox, region, 30) for region in REGIONS}
    assert all(reassigned[r] <= _stale(sandbox)[r] for r in REGIONS)
    for _ in range(PULLS):
        sandbox.app.sandbox.clock.advance(600)  # two new messages per region
        _sync("conversation")
    assert _stale(sandbox) == {region: set() for region in REGIONS}


@pytest.mark.parametrize("stream", ["conversation.members", "conversation.assignments"])
def test_members_on_a_lake_without_messages_say_what_to_run(
    frozen_sandbox, sync_env, capsys, stream
):
    sync_env(frozen_sandbox)
    assert main(["sync", "--streams", stream]) == 2
    said = capsys.readouterr()
    lines = [line for line in (said.out + said.err).splitlines() if "conversation.messages" in line]
    assert len(lines) == 1, said
    assert "sync --streams conversation.messages" in lines[0]
    assert "default, jp" in lines[0]
