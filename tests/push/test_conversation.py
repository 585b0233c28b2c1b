"""Write-back to the conversation service against the sandbox's members: each member's
newest assignment applied, each close applied, once, also across a killed push and two
pushes at once; rows validation or the service refuses kept in `sync.rejected` with the
field. The outbound views here are the test's own (VALUES over the sandbox's members, teams
and users), so no pull is needed."""

import os
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from cli.main import main
from pipelines.push import send
from pipelines.push.validation import validate_record
from sandbox.conversation.members import RESOLVED
from tests.push.test_overlap import start_push
from tests.push.test_push import push_until, run_push

TYPES = ["conversation_assignment", "conversation_close"]
REGIONS = ("default", "jp")
AT = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
ASSIGNMENT_COLUMNS = {
    "connection": "VARCHAR",
    "channel_id": "BIGINT",
    "member_id": "BIGINT",
    "assign_type": "VARCHAR",
    "team_id": "BIGINT",
    "user_id": "BIGINT",
    "updated_at": "TIMESTAMPTZ",
}
CLOSE_COLUMNS = {
    "connection": "VARCHAR",
    "channel_id": "BIGINT",
    "member_id": "BIGINT",
    "user_id": "BIGINT",
    "closed_at": "TIMESTAMPTZ",
}


class Applied:
    """What the sandbox's conversation service applied, per (region, member id): its members'
    `assign` and `close` wrapped with counters (the routes call them on every write)."""

    def __init__(self, sandbox, monkeypatch) -> None:
        self.sandbox = sandbox
        self.assigned: Counter = Counter()
        self.closed: Counter = Counter()
        self._lock = threading.Lock()
        for region in REGIONS:
            members = self.service(region).members
            for name, counter in (("assign", self.assigned), ("close", self.closed)):
                monkeypatch.setattr(
                    members, name, self._counted(getattr(members, name), region, counter)
                )

    def service(self, region: str):
        return self.sandbox.app.services[("conversation", region)]

    def _counted(self, original, region: str, counter: Counter):
        members = self.service(region).members

        def counted(row: int, *args):
            with self._lock:
                counter[(region, members.member_id(row))] += 1
            return original(row, *args)

        return counted

    def requests(self, _sandbox=None) -> int:
        with self._lock:
            return sum(self.assigned.values()) + sum(self.closed.values())

    def assignment(self, region: str, member_id: int) -> dict:
        members = self.service(region).members
        return members.assignment(member_id - members.first_id)

    def resolved(self, region: str, member_id: int) -> bool:
        members = self.service(region).members
        return int(members.table["state"][member_id - members.first_id]) == RESOLVED


def members_of(applied: Applied, region: str, count: int) -> list[tuple[int, int]]:
    """(channel id, member id) of the region's first `count` members."""
    service = applied.service(region)
    channels, members = service.directory.channels, service.members
    return [
        (int(channels[int(members.table["channel"][row])]["id"]), members.member_id(row))
        for row in range(count)
    ]


def directory(applied: Applied, region: str) -> tuple[list[int], list[int], int]:
    """The region's team ids, its active human users' ids and a deactivated user's id."""
    found = applied.service(region).directory
    active = [u["id"] for u in found.users if u["status"] == "active" and u["type"] == "human"]
    (deactivated, *_) = [u["id"] for u in found.users if u["status"] == "deactivated"]
    return [t["id"] for t in found.teams], active, deactivated


def literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def write_view(folder: Path, view: str, columns: dict[str, str], rows: list[dict]) -> None:
    """`outbound.<view>` as VALUES, each column cast to its type."""
    values = ",\n".join("(" + ", ".join(literal(row[c]) for c in columns) + ")" for row in rows)
    casts = ", ".join(f"{name}::{kind} AS {name}" for name, kind in columns.items())
    (folder / "outbound").mkdir(parents=True, exist_ok=True)
    (folder / "outbound" / f"{view}.sql").write_text(
        f"CREATE OR REPLACE VIEW outbound.{view} AS SELECT {casts}\n"
        f"FROM (VALUES {values}) AS rows({', '.join(columns)});\n"
    )


def views(tmp_path: Path, monkeypatch, assignments: list[dict], closes: list[dict]) -> None:
    """The test's outbound views, the only folder of `WAREHOUSE_SQL` (before `sync_env`
    builds the resources)."""
    folder = tmp_path / "sql"
    write_view(folder, "conversation_assignments", ASSIGNMENT_COLUMNS, assignments)
    write_view(folder, "conversation_closes", CLOSE_COLUMNS, closes)
    monkeypatch.setenv("WAREHOUSE_SQL", str(folder))


def decisions(applied: Applied, per_region: dict[str, int]) -> tuple[list[dict], list[dict]]:
    """Two assignments of each member, the newer one first for every third (out of order):
    the older to a team for good, the newer case-based to a team and a user, or (every
    fifth) unassigned; and a close of every fourth member."""
    assignments, closes = [], []
    for region, count in per_region.items():
        teams, users, _ = directory(applied, region)
        for n, (channel_id, member_id) in enumerate(members_of(applied, region, count)):
            member = {"connection": region, "channel_id": channel_id, "member_id": member_id}
            older = member | {
                "assign_type": "permanent",
                "team_id": teams[n % len(teams)],
                "user_id": None,
                "updated_at": AT + timedelta(minutes=n),
            }
            newer = member | {
                "assign_type": "case-based",
                "team_id": teams[(n + 1) % len(teams)],
                "user_id": users[n % len(users)],
                "updated_at": AT + timedelta(hours=1, minutes=n),
            }
            if n % 5 == 0:
                newer |= {"assign_type": "unassigned", "team_id": None, "user_id": None}
            assignments += [newer, older] if n % 3 == 0 else [older, newer]
            if n % 4 == 0:
                closes.append(
                    member | {"user_id": users[0], "closed_at": AT + timedelta(hours=2, minutes=n)}
                )
    return assignments, closes


def newest(assignments: list[dict]) -> dict[tuple[str, int], dict]:
    latest = {}
    for row in sorted(assignments, key=lambda row: row["updated_at"]):
        latest[(row["connection"], row["member_id"])] = row
    return latest


def assert_applied_once(applied: Applied, assignments: list[dict], closes: list[dict]) -> None:
    """Each member holds its newest assignment, each closed member is resolved, and no
    write reached the service twice."""
    expected = newest(assignments)
    for (region, member_id), row in expected.items():
        relationship = {"team_id": row["team_id"], "user_id": row["user_id"]}
        held = applied.assignment(region, member_id)
        assert held == {"assign_type": row["assign_type"], "assignment_relationship": relationship}
    assert set(applied.assigned) == set(expected)
    assert set(applied.assigned.values()) == {1}
    closed = {(row["connection"], row["member_id"]) for row in closes}
    assert all(applied.resolved(*member) for member in closed)
    # A close a killed push had sent is looked up, not sent again.
    assert set(applied.closed) <= closed and set(applied.closed.values()) <= {1}


ROW = {
    "connection": "default",
    "channel_id": 7,
    "member_id": 1_000_001,
    "assign_type": "permanent",
    "team_id": 2,
    "user_id": None,
    "updated_at": AT,
}


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"assign_type": "manual"}, "assign_type", "must be one of"),
        ({"assign_type": None}, "assign_type", "must not be null"),
        ({"team_id": None}, "user_id", "a user_id or a team_id is required"),
        ({"assign_type": "unassigned"}, "team_id", "must be null when assign_type is unassigned"),
        ({"member_id": 0}, "member_id", "must be at least 1"),
        ({"channel_id": "7"}, "channel_id", "must be a number"),
        ({"updated_at": AT.replace(tzinfo=None)}, "updated_at", "needs a timezone"),
    ],
)
def test_an_assignment_is_checked_by_the_rules_of_its_assign_type(change, field, reason):
    body, problems = validate_record("conversation_assignment", ROW | change)
    assert body is None
    [problem] = problems
    assert problem.field == field and reason in problem.reason


def test_valid_assignments_and_closes_give_what_the_client_sends():
    body, problems = validate_record("conversation_assignment", ROW)
    assert problems == []
    assert body == {k: v for k, v in ROW.items() if k != "connection"} | {
        "updated_at": AT.isoformat()
    }
    cleared = ROW | {"assign_type": "unassigned", "team_id": None}
    assert validate_record("conversation_assignment", cleared)[1] == []
    close = {"channel_id": 7, "member_id": 1_000_001, "user_id": 3, "closed_at": AT}
    assert validate_record("conversation_close", close) == (
        close | {"closed_at": AT.isoformat()},
        [],
    )


def test_assignments_and_closes_land_as_the_views_say_and_a_second_push_sends_nothing(
    start_sandbox, sync_env, tmp_path, monkeypatch, capsys
):
    sandbox = start_sandbox()
    applied = Applied(sandbox, monkeypatch)
    assignments, closes = decisions(applied, {"default": 30, "jp": 10})
    views(tmp_path, monkeypatch, assignments, closes)
    resources = sync_env(sandbox)
    # As docs/push.md gives it: the figures printed, nothing sent.
    assert main(["push", "--dry-run", "--types", *TYPES]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    planned = {row[0]: row[1:] for row in rows if row and row[0] in TYPES}
    assert applied.requests() == 0
    assert planned["conversation_assignment"][0] == "40"  # new
    assert planned["conversation_close"][0] == str(len(closes)) == "11"

    figures = run_push(resources, record_types=TYPES)
    assert figures["conversation_assignment"]["sent"] == 40
    assert figures["conversation_close"]["sent"] == 11
    assert_applied_once(applied, assignments, closes)
    assert set(applied.closed.values()) == {1} and len(applied.closed) == 11
    assert {region for region, _ in applied.assigned} == set(REGIONS)  # by `connection`

    again = run_push(resources, record_types=TYPES)
    assert again["conversation_assignment"]["unchanged"] == 40
    assert again["conversation_assignment"]["sent"] == again["conversation_close"]["sent"] == 0
    assert applied.requests() == 40 + 11

    # A newer decision for one member: that one is sent, the others are not.
    first = assignments[2]  # member 1's older decision: a day after its newer one, unassigned
    later = first | {"assign_type": "unassigned", "team_id": None, "user_id": None}
    later["updated_at"] = first["updated_at"] + timedelta(days=1)
    views(tmp_path, monkeypatch, [*assignments, later], closes)
    resources = sync_env(sandbox)
    figures = run_push(resources, record_types=["conversation_assignment"])
    changed = figures["conversation_assignment"]
    assert (changed["changed"], changed["unchanged"], changed["sent"]) == (1, 39, 1)
    member = (first["connection"], first["member_id"])
    assert applied.assignment(*member)["assign_type"] == "unassigned"
    assert applied.assigned[member] == 2


def rejected(resources) -> set[tuple[str, str, str, str]]:
    with duckdb.connect(resources["lake"].warehouse_path, read_only=True) as con:
        return set(
            con.execute(
                "SELECT record_type, key, field, source FROM sync.rejected "
                "WHERE record_type LIKE 'conversation_%'"
            ).fetchall()
        )


def test_invalid_rows_are_kept_with_the_field_and_the_others_are_sent(
    start_sandbox, sync_env, tmp_path, monkeypatch
):
    sandbox = start_sandbox()
    applied = Applied(sandbox, monkeypatch)
    teams, users, deactivated = directory(applied, "default")
    (a, b, c, d, e, f, g), unknown_team = members_of(applied, "default", 7), max(teams) + 1000

    def assignment(member, **fields) -> dict:
        return {
            "connection": "default",
            "channel_id": member[0],
            "member_id": member[1],
            "assign_type": "case-based",
            "team_id": teams[0],
            "user_id": users[0],
            "updated_at": AT,
        } | fields

    assignments = [
        assignment(a),  # valid
        assignment(b, assign_type="vip"),  # not one of the three
        assignment(c, team_id=None, user_id=None),  # case-based needs a team or a user
        assignment(d, assign_type="unassigned"),  # unassigned with a team and a user
        assignment(e, team_id=unknown_team),  # the service knows no such team
        assignment(f, user_id=deactivated),  # the service refuses a deactivated user
        assignment(g, connection="eu"),  # no such conversation connection
    ]
    closes = [
        {"connection": None, "channel_id": a[0], "member_id": a[1], "user_id": users[0]}
        | {"closed_at": AT},  # valid: no connection is the default one
        {"connection": "default", "channel_id": b[0], "member_id": b[1], "user_id": None}
        | {"closed_at": AT},  # the close needs its user
    ]
    views(tmp_path, monkeypatch, assignments, closes)
    resources = sync_env(sandbox)
    figures = run_push(resources, record_types=TYPES)

    key = lambda member, region="default": f"{region}:{member[0]}:{member[1]}"  # noqa: E731
    close_key = f"{key(b)}:{AT}"  # closed_at as the view gives it, in UTC
    found = rejected(resources)
    assert {
        ("conversation_assignment", key(b), "assign_type", "validation"),
        ("conversation_assignment", key(c), "user_id", "validation"),
        ("conversation_assignment", key(d), "team_id", "validation"),
        ("conversation_assignment", key(e), "assignment_relationship.team_id", "service"),
        ("conversation_assignment", key(f), "assignment_relationship.user_id", "service"),
        ("conversation_assignment", key(g, "eu"), "connection", "service"),
        ("conversation_close", close_key, "user_id", "validation"),
    } == found
    assert figures["conversation_assignment"]["sent"] == 1
    assert figures["conversation_assignment"]["refused"] == 3
    assert figures["conversation_close"]["sent"] == 1
    assert applied.assigned == Counter({("default", a[1]): 1})
    assert applied.resolved("default", a[1])


def test_a_push_killed_part_way_then_two_at_once_apply_each_newest_assignment_once(
    start_sandbox, sync_env, tmp_path, monkeypatch
):
    """`python -m cli push` killed after 60 writes reached the service (with up to 8
    more in flight, their answers lost), then two pushes started together: one holds the
    lake, the other waits and finds nothing left. The rows the killed push had sent are
    looked up at the service, not sent again."""
    sandbox = start_sandbox()
    applied = Applied(sandbox, monkeypatch)
    assignments, closes = decisions(applied, {"default": 400})
    views(tmp_path, monkeypatch, assignments, closes)
    sync_env(sandbox)
    env = dict(os.environ)
    printed = tmp_path / "killed.txt"
    killed = push_until(sandbox, env, TYPES, 60, printed, seen=applied.requests)
    assert killed is None, printed.read_text()  # it ended before 60 writes were applied
    assert 60 <= applied.requests() < 500
    pushes = [start_push(env, TYPES), start_push(env, TYPES)]
    outputs = [push.communicate(timeout=600)[0] for push in pushes]
    assert [push.returncode for push in pushes] == [0, 0], outputs
    assert_applied_once(applied, assignments, closes)
    assert len(applied.assigned) == 400
    # What the killed push had in flight (marked, no answer) was looked up, not resent.
    looked = sum(e["count"] for e in sandbox.app.traffic.summary() if e["method"] == "GET")
    assert 0 < looked <= send.WORKERS
