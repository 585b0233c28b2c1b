"""Make the comment automation service match the activities folder: `plan` says, per
connection, what would be created, updated, paused, activated or deleted, and what drifted;
`apply` does it, and writes nothing where nothing differs.

Which service activity a file means: the one the apply log (pipelines/activities/state.py)
last recorded under its name, while the service still has it, else the one of that name
(an activity made in the dashboard is taken over by the first apply; two of one name are
refused, naming their ids). An activity no file names is never touched.

A field is written when the file's value differs from the service's, unless the file still
says what the last apply sent and the service still holds what it answered then (the
service may keep a value in its own form: a post URL as the post's id).

Drift: a managed activity whose fields at the service differ from what the last apply
left there (changed in the dashboard), or that was deleted there. `apply` puts the file's
values back and records the drift with the change.

What needs a flag, since it reaches real people or removes their history: a change that
makes an activity active (`allow_activate`), a delete (`allow_delete`, which also removes
the activity's trigger logs at the service). Without it, `apply` refuses before any write,
a line per change (`Refused`).

Requests go through each connection's `Transport` (pipelines/transport/), paced on the key's
shared budget like a pull's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from pipelines.activities.declared import Declared, read_folder
from pipelines.activities.progress import connections_planned
from pipelines.activities.state import CHANGES, FIELDS, Applied, comparable, last_applied
from pipelines.clients.base import Connection
from pipelines.clients.comment import CommentAutomation, CommentClient
from pipelines.clients.failures import explain
from pipelines.errors import ServiceRefused, SetupError, Unavailable
from pipelines.lake import Lake
from pipelines.lake.object_store import lake_fault
from pipelines.transport import CallStats, ServiceError

ALLOW_ACTIVATE = "--allow-activate"
ALLOW_DELETE = "--allow-delete"


class Refused(SetupError):
    """Changes that need a flag not given; nothing was written. One line per change."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("; ".join(lines))


@dataclass
class Change:
    declared: Declared
    action: str  # create, update, pause, activate, delete
    fields: list[str]
    current: dict[str, Any] | None  # comparable, with "id"; None for a create
    drift: list[str] | None

    @property
    def needs(self) -> str | None:
        if self.action == "delete":
            return ALLOW_DELETE
        if self.declared.wanted and self.declared.wanted["status"] == "active":
            was = self.current["status"] if self.current else None
            if was != "active":
                return ALLOW_ACTIVATE
        return None

    def line(self) -> str:
        fields = f": {', '.join(self.fields)}" if self.action not in ("create", "delete") else ""
        return f"{self.action:<8} {self.declared.name!r}{fields}  ({self.declared.file})"


@dataclass
class Drifted:
    declared: Declared
    fields: list[str]
    since: datetime

    def line(self) -> str:
        what = (
            "deleted at the service"
            if self.fields == ["deleted"]
            else f"changed at the service: {', '.join(self.fields)}"
        )
        return (
            f"drift    {self.declared.name!r} {what} since the last apply "
            f"({self.since:%Y-%m-%d %H:%M} UTC)  ({self.declared.file})"
        )


@dataclass
class ConnectionPlan:
    connection: str
    changes: list[Change] = field(default_factory=list)
    drift: list[Drifted] = field(default_factory=list)
    #: Names the log says are managed that no file declares any more: left alone.
    undeclared: list[str] = field(default_factory=list)

    def lines(self, *, flags: bool) -> list[str]:
        """A line per change (with the flag it needs, where `flags`), drift and name left."""
        lines = [
            c.line() + (f"  needs {c.needs}" if flags and c.needs else "") for c in self.changes
        ]
        lines += [d.line() for d in self.drift]
        lines += [
            f"left     {name!r}: applied before, no file names it now; left alone (a file "
            "with `delete = true` deletes it)"
            for name in self.undeclared
        ]
        return lines or ["no changes"]


@dataclass
class Outcome:
    plans: list[ConnectionPlan]
    applied: int = 0  # changes written

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for plan in self.plans:
            for change in plan.changes:
                counts[change.action] = counts.get(change.action, 0) + 1
            if plan.drift:
                counts["drift"] = counts.get("drift", 0) + len(plan.drift)
        return counts


def plan_activities(service: CommentAutomation, lake: Lake, folder: Path) -> Outcome:
    """What would change, per connection a file or the apply log names (one the settings
    no longer set is left out); nothing is written."""
    connections = {c.name: c for c in service.connections}
    declared = read_folder(folder, list(connections))
    applied = last_applied(lake)
    named = {d.connection for d in declared} | (set(applied) & set(connections))
    plans = []
    for name in sorted(named):
        mine = [d for d in declared if d.connection == name]
        with _client(service, connections[name], CallStats()) as client:
            plans.append(_plan_connection(client, applied.get(name, {}), name, mine))
    return Outcome(plans)


def apply_activities(
    service: CommentAutomation,
    lake: Lake,
    folder: Path,
    *,
    by: str,
    allow_activate: bool = False,
    allow_delete: bool = False,
    log: Callable[[str], object] = lambda _: None,
) -> Outcome:
    """`plan_activities`, then its changes made, each recorded in the apply log; refused
    whole (`Refused`) before any write if a change needs a flag not given. Each change made
    is said to `log` (`pipelines/activities/progress.py`)."""
    outcome = plan_activities(service, lake, folder)
    allowed = {ALLOW_ACTIVATE: allow_activate, ALLOW_DELETE: allow_delete}
    refused = [
        f"{c.declared.file}: {c.action} of {c.declared.name!r} in connection "
        f"{plan.connection!r} "
        + (
            "deletes it and its trigger logs at the service"
            if c.needs == ALLOW_DELETE
            else "makes it active: the account replies to real people"
        )
        + f"; pass {c.needs} to allow it"
        for plan in outcome.plans
        for c in plan.changes
        if c.needs and not allowed[c.needs]
    ]
    if refused:
        raise Refused(refused)
    apply_id = uuid.uuid4().hex
    connections = {c.name: c for c in service.connections}
    progress = connections_planned(
        {p.connection: len(p.changes) for p in outcome.plans if p.changes}
    )
    for plan in outcome.plans:
        if not plan.changes:
            continue
        going = progress[plan.connection]
        going.begin()
        rows: list[dict] = []
        try:
            with _client(service, connections[plan.connection], going.stats) as client:
                for change in plan.changes:
                    going.making(change.action, change.declared.name)
                    rows.append(_made(client, change, plan.connection, apply_id, by))
                    log(going.made())
        finally:
            going.end(failed=len(rows) < len(plan.changes))
            if rows:  # what was done is recorded even when a later change failed
                _log(lake, rows, plan.connection)
                outcome.applied += len(rows)
    return outcome


def _made(client: CommentClient, change: Change, connection: str, apply_id: str, by: str) -> dict:
    """`_make`, a change the service refuses told with its file, action, activity and
    connection after the service's own words."""
    try:
        return _make(client, change, connection, apply_id, by)
    except ServiceError as error:
        if error.status != 400:
            raise
        raise ServiceRefused(
            f"{error}; refused: the {change.action} of {change.declared.name!r} in connection "
            f"{connection!r}, declared by {change.declared.file}: correct it there"
        ) from None


def _log(lake: Lake, rows: list[dict], connection: str) -> None:
    """The apply log's file of one connection's changes; the lake's failure told."""
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    try:
        lake.write(CHANGES, f"{stamp}-{uuid.uuid4().hex[:12]}", rows)
    except OSError as error:
        then = (
            f"the service has the {len(rows)} change(s) made in connection {connection!r}, "
            "which the apply log does not record: the next plan may show them as drift"
        )
        fault = lake_fault(error, lake.place.uri, then)
        if fault is None:
            raise
        raise fault from None


@contextmanager
def _client(
    service: CommentAutomation, connection: Connection, stats: CallStats
) -> Iterator[CommentClient]:
    """A client of `connection`, its calls counted in `stats`; what the service answered, or
    that it could not be reached, told with the connection and its settings (`explain`). A
    400 is the file's to fix and says so itself."""
    try:
        with service.transport(connection, stats) as transport:
            yield service.client(transport)
    except ServiceError as error:
        if error.status == 400:
            raise
        raise ServiceRefused(explain(service, connection, error)) from None
    except httpx.TransportError as error:
        raise Unavailable(explain(service, connection, error)) from None


def _plan_connection(
    client: CommentClient, applied: dict[str, Applied], connection: str, declared: list[Declared]
) -> ConnectionPlan:
    _check_accounts(client, connection, declared)
    held = {
        a.id: {**comparable(a.model_dump()), "id": a.id} for a in client.activities().activities
    }
    plan = ConnectionPlan(connection)
    for one in declared:
        last = applied.get(one.name)
        managed = last if last is not None and last.after is not None else None
        current = held.get(managed.activity_id) if managed else None
        if current is None:
            current = _by_name(one, held)
        if managed is not None:
            drift = _drift(managed, held)
            if drift:
                plan.drift.append(Drifted(one, drift, managed.applied_at))
        else:
            drift = None
        change = _change(one, current, managed, drift or None)
        if change is not None:
            plan.changes.append(change)
    names = {one.name for one in declared}
    plan.undeclared = sorted(
        name for name, last in applied.items() if last.after is not None and name not in names
    )
    return plan


def _by_name(one: Declared, held: dict[str, dict]) -> dict | None:
    named = [a for a in held.values() if a["name"] == one.name]
    if len(named) > 1:
        ids = ", ".join(sorted(a["id"] for a in named))
        raise SetupError(
            f"{one.file}: name: {len(named)} activities at the service are named "
            f"{one.name!r} ({ids}) in connection {one.connection!r}: rename or delete all but "
            "one in the dashboard, so the file means one activity"
        )
    return named[0] if named else None


def _drift(managed: Applied, held: dict[str, dict]) -> list[str]:
    current = held.get(managed.activity_id or "")
    if current is None:
        return ["deleted"]
    return [f for f in FIELDS if current[f] != managed.after.get(f)]


def _change(
    one: Declared, current: dict | None, managed: Applied | None, drift: list[str] | None
) -> Change | None:
    wanted = one.wanted
    if wanted is None:
        return Change(one, "delete", [], current, drift) if current else None
    if current is None:
        return Change(one, "create", list(FIELDS), None, drift)
    if current["account_id"] != wanted["account_id"]:
        raise SetupError(
            f"{one.file}: account_id: the activity {current['id']} replies as account "
            f"{current['account_id']}, and the service cannot move an activity to another "
            "account: delete it (`delete = true`) and declare the new one under another name"
        )
    kept = _kept(managed, wanted, current)
    changed = [f for f in FIELDS if wanted[f] != current[f] and f not in kept]
    if not changed:
        return None
    action = "update"
    if "status" in changed:
        action = {"paused": "pause", "active": "activate"}.get(wanted["status"], "update")
    return Change(one, action, changed, current, drift)


def _kept(managed: Applied | None, wanted: dict, current: dict) -> set[str]:
    """Fields the file says as it did at the last apply of this activity and the service
    holds as that apply left them: the service's own form of the file's value (a post URL
    kept as the post's id) is no change."""
    if managed is None or managed.activity_id != current["id"] or managed.wanted is None:
        return set()
    return {
        f
        for f in FIELDS
        if managed.wanted.get(f) == wanted[f] and managed.after.get(f) == current[f]
    }


def _make(client: CommentClient, change: Change, connection: str, apply_id: str, by: str) -> dict:
    wanted = change.declared.wanted
    before = change.current
    activity_id = before["id"] if before else None
    if change.action == "delete":
        try:
            client.delete_activity(activity_id)
        except ServiceError as error:
            if error.status != 404:  # 404: gone already (deleted meanwhile, or a lost answer)
                raise
        after = None
    elif change.action == "create":
        body = _create_body(wanted)
        made = client.create_activity(body)
        activity_id = made.id
        if wanted["status"] == "paused":  # created as a draft: a create cannot pause
            made = client.update_activity(made.id, {"status": "paused"})
        after = comparable(made.model_dump())
    else:
        body = {name: wanted[name] for name in change.fields}  # a gate's texts null: cleared
        after = comparable(client.update_activity(activity_id, body).model_dump())
    return {
        "apply_id": apply_id,
        "applied_at": datetime.now(UTC),
        "applied_by": by,
        "connection": connection,
        "name": change.declared.name,
        "activity_id": activity_id,
        "action": change.action,
        "fields": json.dumps(change.fields),
        "before": _json(before),
        "after": _json(after),
        "wanted": _json(wanted),
        "drift": json.dumps(change.drift) if change.drift else None,
        "file": change.declared.file,
    }


def _create_body(wanted: dict[str, Any]) -> dict[str, Any]:
    """The create's body: what differs from the service's defaults, and the two required."""
    body = dict(wanted)
    body["status"] = "active" if wanted["status"] == "active" else "draft"
    if not wanted["post_ids"]:
        del body["post_ids"]
    gate = {key: text for key, text in wanted["follow_gate"].items() if text is not None}
    body["follow_gate"] = gate
    if gate == {"enabled": False}:
        del body["follow_gate"]
    for name in ("start_at", "end_at"):
        if body[name] is None:
            del body[name]
    return body


def _json(values: dict | None) -> str | None:
    return None if values is None else json.dumps(values, ensure_ascii=False, sort_keys=True)


def _check_accounts(client: CommentClient, connection: str, declared: list[Declared]) -> None:
    """Each file's account is connected and supports its trigger, before any write."""
    listed = client.accounts()
    accounts = {a.id: a for a in listed.accounts}
    for one in declared:
        if one.wanted is None:
            continue
        account = accounts.get(one.wanted["account_id"])
        if account is None:
            raise SetupError(
                f"{one.file}: account_id: no account {one.wanted['account_id']!r} is connected "
                f"in connection {connection!r}: use an id of `GET /accounts`, or connect it "
                f"at {listed.connect_url}"
            )
        if one.wanted["trigger"] not in (account.supported_triggers or []):
            raise SetupError(
                f"{one.file}: trigger: {one.wanted['trigger']} is not supported by the "
                f"{account.platform} account {account.id}; it supports "
                f"{', '.join(account.supported_triggers or [])}"
            )
