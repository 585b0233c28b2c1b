"""What an activity is, in one comparable form, and the apply log that says which
activities the folder manages.

`comparable` turns a file's activity and the service's answer into the same plain values
(every input field present, the service's defaults filled in, date-times in UTC, a DM block
without its empty fields), so that equal activities compare equal.

The apply log, `<lake>/sync/activity_changes/`, is a file per apply and connection, a row per
change: what changed, the activity before and after, the file's wish, who applied it. It is
the record of what is managed (an activity a file applied, under its name, until a file
deletes it) and of what the service held after the last apply, which drift is measured
against. The warehouse shows it as `sync.activity_changes` (sql/sync/activity_changes.sql).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from pipelines.errors import Damaged
from pipelines.lake import Lake
from pipelines.lake.object_store import lake_fault
from pipelines.pull.damaged import damaged_files
from pipelines.stream import TIMESTAMP, Stream, described

GATE_FIELDS = ("enabled", "opening_text", "button_title", "not_following_text")

CHANGES = Stream(
    "sync",
    "activity_changes",
    pa.schema(
        [
            described("apply_id", pa.string(), "One `activities apply`: its id."),
            described("applied_at", TIMESTAMP, "When the change was made (UTC)."),
            described(
                "applied_by",
                pa.string(),
                "Who applied it: `--by`, the Dagster run's, or the user of the OS.",
            ),
            described("connection", pa.string(), "The comment automation connection."),
            described("name", pa.string(), "The activity's name: its identity in the folder."),
            described("activity_id", pa.string(), "The activity's id at the service."),
            described(
                "action", pa.string(), "`create`, `update`, `pause`, `activate` or `delete`."
            ),
            described("fields", pa.string(), "The fields written, as a JSON array."),
            described(
                "before",
                pa.string(),
                "The activity at the service before the change, as JSON; null for a create.",
            ),
            described(
                "after",
                pa.string(),
                "The activity as the service answered the change, as JSON; null for a delete.",
            ),
            described(
                "wanted",
                pa.string(),
                "The activity the file declared, as JSON; null for a delete.",
            ),
            described(
                "drift",
                pa.string(),
                "The fields changed at the service since the last apply, as a JSON array "
                '(`["deleted"]` when it was deleted there); null when none were.',
            ),
            described("file", pa.string(), "The file that declared the change."),
        ]
    ),
    key=("apply_id", "connection", "name"),
)


def utc_text(value: datetime | str | None) -> str | None:
    """A date-time as ISO 8601 in UTC."""
    if value is None:
        return None
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def comparable(values: dict[str, Any]) -> dict[str, Any]:
    """An activity's input fields (`FIELDS`) in one form, from a file or the service's
    answer."""
    gate = values.get("follow_gate") or {}
    return {
        "name": values.get("name"),
        "status": values.get("status"),
        "account_id": values.get("account_id"),
        "trigger": values.get("trigger"),
        "keywords": list(values.get("keywords") or []),
        "match": values.get("match") or "contains",
        "public_replies": list(values.get("public_replies") or []),
        "dm": [_block(block) for block in values.get("dm") or []],
        "post_scope": values.get("post_scope") or "all",
        "post_ids": list(values.get("post_ids") or []),
        "follow_gate": {name: gate.get(name) for name in GATE_FIELDS}
        | {"enabled": bool(gate.get("enabled"))},
        "start_at": utc_text(values.get("start_at")),
        "end_at": utc_text(values.get("end_at")),
    }


#: The input fields an activity is compared by, in the spec's order ("Activity input fields").
FIELDS = tuple(comparable({}))


def _block(block: dict[str, Any]) -> dict[str, Any]:
    kept = {name: value for name, value in block.items() if value is not None}
    if "buttons" in kept:
        kept["buttons"] = [{"title": b.get("title"), "url": b.get("url")} for b in kept["buttons"]]
    return kept


@dataclass(frozen=True)
class Applied:
    """The last apply of a name in a connection: the activity's id, what the file declared
    and what the service held after it (None after a delete: the name is no longer
    managed)."""

    activity_id: str | None
    wanted: dict[str, Any] | None
    after: dict[str, Any] | None
    applied_at: datetime


_JSON = ("wanted", "after")
_READ = ["connection", "name", "activity_id", *_JSON, "applied_at"]


def last_applied(lake: Lake) -> dict[str, dict[str, Applied]]:
    """Per connection and name, the last change applied; a damaged log file is told."""
    rows = []
    for path in lake.files(CHANGES):
        try:
            rows += lake.read_table(path, _READ).to_pylist()
        except (OSError, pa.ArrowException) as error:
            fault = lake_fault(error, lake.place.uri)  # the store's, not the file's
            raise (fault or _damaged(lake.uri(path), str(error))) from None
    found: dict[str, dict[str, Applied]] = {}
    for row in sorted(rows, key=lambda r: r["applied_at"]):
        wanted, after = (json.loads(row[k]) if row[k] is not None else None for k in _JSON)
        applied = Applied(row["activity_id"], wanted, after, row["applied_at"])
        found.setdefault(row["connection"], {})[row["name"]] = applied
    return found


def refuse_if_damaged(lake: Lake) -> None:
    """Raise `Damaged` naming each file of the apply log that cannot be read, every page
    read. Like the push ledger's (`pipelines/streams/pushed.py`), such a file is not set aside:
    no run can make it again, and without it the activities it applied are no longer known
    as managed."""
    damaged = damaged_files(lake, CHANGES)
    if damaged:
        raise _damaged(", ".join(damaged), "; ".join(damaged.values()))


def _damaged(files: str, why: str) -> Damaged:
    return Damaged(
        f"{files} of the activities' apply log cannot be read ({why}): restore it from a "
        "backup of the lake; without it, the activities it applied are no longer known as "
        "managed, nor their drift"
    )
