"""Plan a push: validate each outbound row, keep the newest version per key, and compare it
with what the service has already accepted (the ledger). Nothing is sent here, so the dry
run and the real run share the same figures.

Per key, the data hub keeps the submission with the latest timestamp as current:
- new: never accepted; changed: newer than the accepted version (or, without a timestamp,
  different content); unchanged: the accepted version again; stale: older than accepted,
  never sent; rejected (per row): fails validation, or shares the newest timestamp of its
  key with different content (a conflict, kept rather than guessed);
- waiting: the key's newest version is invalid, in conflict, or has no readable timestamp
  (so which one is newest cannot be told). Its older valid versions are not sent either: the
  service would take one as current though the warehouse knows it is superseded. The key is
  sent once its newest version is valid. Record types without a timestamp have the view's
  last row of a key as its newest.

The conversation service keeps what was written last: a member's assignment is the newest
`updated_at` of its key, sent once, as a record is; each close is a key of its own.
"""

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Protocol

from pipelines.push import validation
from pipelines.push.ledger import Entry, as_json

DEFAULT_CONNECTION = "default"


@dataclass
class Planned:
    key: str
    body: dict  # what is sent
    content_hash: str
    timestamp: datetime | None
    connection: str
    import_key: str | None = None
    #: What the ledger keeps: the whole record, also when `body` is a partial update.
    content: str = ""
    #: The key's last mark is `sending` with no answer: a push sent it and was killed (or
    #: its answer was lost). Where the service can be asked (`Outbound.asks_arrival`), the
    #: sender looks before it sends again.
    in_doubt: bool = False


class KeyColumns(Protocol):
    """A row's key columns; its key is their values joined by ":" (a missing `connection` is
    the default one). `sql` says the same key in DuckDB, over a view with the columns given,
    so the warehouse can tell which keys changed (`pipelines/push/changes.py`); where the two
    differ for a row (a column DuckDB writes otherwise than Python), the record type is
    planned whole, as if nothing were known of the last push."""

    def __call__(self, row: Mapping[str, Any]) -> tuple[str, ...]: ...

    def sql(self, view_columns: Mapping[str, str]) -> str: ...


_STAMP = (
    "strftime({value}, '%Y-%m-%d %H:%M:%S') "
    "|| CASE WHEN microsecond({value}) % 1000000 = 0 THEN '' ELSE strftime({value}, '.%f') END"
)
#: Python's text of a value (`str`) where DuckDB's cast to text differs, for a column of the
#: type: a timestamp's fraction in six digits and only when it has one, its offset `+00:00`
#: (the push reads in UTC), a boolean capitalised.
_PYTHON_TEXT = {
    "TIMESTAMP WITH TIME ZONE": f"{_STAMP} || '+00:00'",
    "TIMESTAMP": _STAMP,
    "BOOLEAN": "CASE WHEN {value} THEN 'True' ELSE 'False' END",
}


def _value_sql(column: str, view_columns: Mapping[str, str]) -> str:
    """A key column's text in DuckDB, as `row_key` writes it (`view_columns`: each column's
    DuckDB type)."""
    quoted = f'"{column}"'
    if column == "connection":
        present = f"nullif(CAST({quoted} AS VARCHAR), '')" if column in view_columns else "NULL"
        return f"coalesce({present}, '{DEFAULT_CONNECTION}')"
    if column not in view_columns:
        return "''"
    text = _PYTHON_TEXT.get(view_columns[column], "CAST({value} AS VARCHAR)")
    return f"coalesce({text.format(value=quoted)}, '')"


@dataclass(frozen=True)
class _Columns:
    """A key made of the same columns in every row."""

    names: tuple[str, ...]

    def __call__(self, _row: Mapping[str, Any]) -> tuple[str, ...]:
        return self.names

    def sql(self, view_columns: Mapping[str, str]) -> str:
        return " || ':' || ".join(_value_sql(c, view_columns) for c in self.names)


class _ImportKey:
    """An import row is keyed by the attribute it matches on and that attribute's value, so
    two rows matching on different attributes are different keys. A row without a usable
    `import_key` is keyed by that column alone (validation rejects it)."""

    def __call__(self, row: Mapping[str, Any]) -> tuple[str, ...]:
        attribute = row.get("import_key")
        return ("import_key", attribute) if isinstance(attribute, str) else ("import_key",)

    def sql(self, view_columns: Mapping[str, str]) -> str:
        if "import_key" not in view_columns:
            return "''"
        named = " ".join(
            f"WHEN '{c}' THEN {_value_sql(c, view_columns)}"
            for c in sorted({*view_columns, "connection"})
            if not {"'", '"'} & set(c)
        )
        return f"coalesce(\"import_key\" || ':' || CASE \"import_key\" {named} ELSE '' END, '')"


#: A row and the custom field definitions of the connection it goes to: the body to send, or
#: None and every problem found.
Validator = Callable[
    [Mapping[str, Any], Sequence[Mapping[str, Any]]],
    tuple[dict | None, list[validation.Problem]],
]
#: A key's newest version and the ledger's last accepted one, whose content differs: what to
#: send, or None when nothing the service keeps would change.
Diff = Callable[[Planned, Entry], Planned | None]


class Sending(Enum):
    """How the planned rows of a record type reach the service."""

    RECORD = "one submission per row (send.py)"
    PROFILE_UPDATE = "one partial profile update per row (send.py)"
    MEMBER_IMPORT = "bulk imports per import_key (imports.py)"


def _columns(*names: str) -> KeyColumns:
    return _Columns(names)


def _submitted(record_type: str) -> Validator:
    """A record submitted one by one, checked against its model (`validation/`); custom
    field definitions concern profile updates only."""
    return lambda row, _custom_fields: validation.validate_record(record_type, row)


def _import_row(
    row: Mapping[str, Any], _custom_fields: Sequence[Mapping[str, Any]]
) -> tuple[dict | None, list[validation.Problem]]:
    """An import row, checked for the attribute its own `import_key` names."""
    return validation.validate_import_row(row, row.get("import_key"))


def _whole_record(candidate: Planned, _last_accepted: Entry) -> Planned:
    """Any change sends the whole newest version again."""
    return candidate


def _done_once(_candidate: Planned, _last_accepted: Entry) -> None:
    """What was accepted happened, and is not done again for another content of its key (a
    conversation closed once stays that close)."""
    return None


def _changed_profile_fields(candidate: Planned, last_accepted: Entry) -> Planned | None:
    """A profile update sends only what changed since the last accepted push (a partial
    `data`, as the hub accepts it); the ledger then keeps the merged whole for the next diff."""
    before = dict(json.loads(last_accepted.content).get("data", {}))
    after = candidate.body["data"]
    data = {k: v for k, v in after.items() if k != "custom_fields" and before.get(k) != v}
    custom_before = before.get("custom_fields") or {}
    custom = {
        k: v for k, v in (after.get("custom_fields") or {}).items() if custom_before.get(k) != v
    }
    if custom:
        data["custom_fields"] = custom
    return replace(candidate, body=candidate.body | {"data": data}) if data else None


@dataclass(frozen=True)
class Outbound:
    """One record type: the outbound view it is read from (`sql/outbound/`), how a row is
    keyed and checked, how its newest version is compared with the last accepted one, the
    service it goes to and how it is sent (the operation is the service client's
    `SUBMIT_OPERATIONS` entry of the record type). The planning and sending code reads these,
    never the type's name."""

    view: str
    key: KeyColumns
    validate: Validator
    #: Rows carry a timestamp (the column `timestamp` names), the latest of a key being its
    #: current state; without one, the view's last row of a key is its newest, and any
    #: different content is a change.
    timestamped: bool = True
    timestamp: str = "timestamp"
    #: The service whose connections (`connection` column) the rows go to.
    service: str = "datahub"
    #: The service can be asked whether a row arrived (its client's `arrived`): a row a
    #: killed push marked `sending` is looked up, and sent again only if it did not.
    asks_arrival: bool = False
    #: The service appends each submission instead of keeping the newest per key, and offers
    #: no way to ask whether one arrived: a resend would store it twice. Each is recorded as
    #: `SENDING` before its request, and one whose answer never came is left in doubt.
    at_most_once: bool = False
    diff: Diff = _whole_record
    sending: Sending = Sending.RECORD
    #: Rows the product adds beside the view's, as a query of the warehouse (a record type
    #: without its view plans these alone).
    also: str | None = None


#: The assignments the AI agent's reply functions asked for with their handovers (docs/agent.md,
#: "Routed handovers"), each as of when it was answered: pushed beside the view's, the newest
#: assignment of a member winning.
AGENT_HANDOVERS = """
SELECT handover_connection AS connection, channel_id, member_id,
    handover_assign_type AS assign_type, handover_team_id AS team_id,
    handover_user_id AS user_id, answered_at AS updated_at
FROM conversation.agent_requests
WHERE handover_team_id IS NOT NULL OR handover_user_id IS NOT NULL
"""

#: Record keys, as the sandbox reads the hub's records (`sandbox/README.md`): coupon id;
#: order id; fulfillment order_id; tier, point and reservation with the customer; behavior
#: events by the brand's event_key; contacts by the three ids a profile update names; import
#: rows by the matching attribute.
OUTBOUND: dict[str, Outbound] = {
    # In push order: imports first (they create contacts that profile updates and records
    # may name), then profiles, records, events.
    "member_import": Outbound(
        "member_imports",
        _ImportKey(),
        _import_row,
        timestamped=False,
        sending=Sending.MEMBER_IMPORT,
    ),
    "contact_profile": Outbound(
        "contact_profiles",
        _columns("channel_type", "external_channel_id", "external_member_id"),
        validation.validate_profile_update,
        timestamped=False,
        diff=_changed_profile_fields,
        sending=Sending.PROFILE_UPDATE,
    ),
    "coupon": Outbound("coupons", _columns("id"), _submitted("coupon")),
    "order": Outbound("orders", _columns("id"), _submitted("order")),
    "order_fulfillment": Outbound(
        "order_fulfillments", _columns("order_id"), _submitted("order_fulfillment")
    ),
    "membership_tier": Outbound(
        "membership_tiers",
        _columns("source_platform_customer_id", "tier_id"),
        _submitted("membership_tier"),
    ),
    "point": Outbound(
        "points", _columns("source_platform_customer_id", "type"), _submitted("point")
    ),
    "reservation": Outbound(
        "reservations", _columns("source_platform_customer_id", "id"), _submitted("reservation")
    ),
    "behavior_event": Outbound(
        "behavior_events",
        _columns("event_key"),
        _submitted("behavior_event"),
        timestamped=False,
        at_most_once=True,
    ),
    # The conversation service, after the hub: assignments, then closes.
    "conversation_assignment": Outbound(
        "conversation_assignments",
        _columns("connection", "channel_id", "member_id"),
        _submitted("conversation_assignment"),
        timestamp="updated_at",
        service="conversation",
        asks_arrival=True,
        also=AGENT_HANDOVERS,
    ),
    "conversation_close": Outbound(
        "conversation_closes",
        _columns("connection", "channel_id", "member_id", "closed_at"),
        _submitted("conversation_close"),
        timestamped=False,
        diff=_done_once,
        service="conversation",
        asks_arrival=True,
    ),
}
#: A key the service refused at an earlier push, unchanged since, and not due for its retry
#: (`pipelines/push/changes.py`): not planned, not sent.
REFUSED_BEFORE = "refused_before"
OUTCOMES = (
    "new",
    "changed",
    "unchanged",
    "stale",
    "waiting",
    "in_doubt",
    "rejected",
    REFUSED_BEFORE,
)
#: The ledger state of an at-most-once row whose request went and whose answer did not come.
SENDING = "sending"


@dataclass
class Versions:
    """Every row of one key in the view: the valid ones, ready to send, and when the invalid
    ones were (None: unreadable)."""

    valid: list[Planned] = field(default_factory=list)
    invalid_times: list[datetime | None] = field(default_factory=list)
    last_is_invalid: bool = False


@dataclass
class Plan:
    record_type: str
    to_send: list[Planned] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    rejections: list[dict] = field(default_factory=list)
    #: Each key's decision, an outcome other than `rejected`; a key none of whose rows is
    #: valid, or whose newest version conflicts with the ledger's, has none.
    decided: dict[str, str] = field(default_factory=dict)
    #: The rows of each key counted `rejected`.
    rejected_rows: Counter = field(default_factory=Counter)

    def count(self, key: str, outcome: str, rows: int = 1) -> None:
        self.counts[outcome] += rows
        if outcome == "rejected":
            self.rejected_rows[key] += rows
        else:
            self.decided[key] = outcome

    def figures(self) -> dict[str, int]:
        return {outcome: self.counts[outcome] for outcome in OUTCOMES}


def content_hash(content: str) -> str:
    """The hash of a body's JSON (`as_json`), by which the ledger tells versions apart."""
    return hashlib.sha256(content.encode()).hexdigest()[:32]


def row_key(record_type: str, row: Mapping[str, Any]) -> str:
    """The key columns' values joined by ":" (a missing `connection` is the default one)."""
    values = dict(row)
    values["connection"] = row.get("connection") or DEFAULT_CONNECTION
    columns = OUTBOUND[record_type].key(row)
    return ":".join("" if values.get(c) is None else str(values.get(c)) for c in columns)


def _rejection(key: str, problem_field: str, reason: str, source: str, row) -> dict:
    return {
        "key": key,
        "field": problem_field,
        "reason": reason,
        "source": source,
        "row": as_json(dict(row)),
    }


def _timestamp(row: Mapping[str, Any], column: str) -> datetime | None:
    try:
        return validation.moment(row.get(column))
    except ValueError:
        return None


#: The rows in doubt a push sends again: every one (True), none (False), or those of the keys
#: given (`sync.rejected`'s `key` of a row of source `in_doubt`).
Resend = bool | frozenset[str]


def make_plan(
    record_type: str,
    rows: Iterable[Mapping[str, Any]],
    accepted: Mapping[str, Entry],
    custom_fields: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    resend_in_doubt: Resend = False,
    senders_gone: bool = True,
) -> Plan:
    """`custom_fields`: each connection's pulled definitions (profile updates are checked
    against the organization they go to). `resend_in_doubt`: send again the rows marked
    `sending` whose answer never came, all of them or the keys given (default: report them
    as in doubt, send nothing).
    `senders_gone`: no push that marked them is alive (`Lease.alone`), so a record among
    them is sent again (the hub keeps the latest timestamp: a resend changes nothing it holds
    as current); while one may be, stalled, it may still send them, so they are in doubt."""
    custom_fields = custom_fields or {}
    plan = Plan(record_type)
    outbound = OUTBOUND[record_type]
    versions: dict[str, Versions] = defaultdict(Versions)
    for row in rows:
        key = row_key(record_type, row)
        connection = row.get("connection") or DEFAULT_CONNECTION
        body, problems = outbound.validate(row, custom_fields.get(connection, ()))
        of_key = versions[key]
        of_key.last_is_invalid = bool(problems)
        if problems:
            plan.count(key, "rejected")
            plan.rejections += [
                _rejection(key, p.field, p.reason, "validation", row) for p in problems
            ]
            if outbound.timestamped:
                of_key.invalid_times.append(_timestamp(row, outbound.timestamp))
            continue
        content = as_json(body)
        of_key.valid.append(
            Planned(
                key=key,
                body=body,
                content_hash=content_hash(content),
                timestamp=_timestamp(body, outbound.timestamp) if outbound.timestamped else None,
                connection=connection,
                # What a bulk import is grouped by: the attribute its rows match on.
                import_key=row.get("import_key")
                if outbound.sending is Sending.MEMBER_IMPORT
                else None,
                content=content,
            )
        )
    for key, of_key in versions.items():
        if of_key.valid:
            entry = accepted.get(key)
            resend = resend_in_doubt is True or (
                not isinstance(resend_in_doubt, bool) and key in resend_in_doubt
            )
            if _in_doubt_still(outbound, entry, of_key, resend, senders_gone):
                _in_doubt(plan, key, of_key.valid[-1], outbound)
            else:
                _decide(plan, key, of_key, entry, outbound)
    return plan


def _newest(plan: Plan, key: str, versions: Versions, outbound: Outbound) -> Planned | None:
    """The version to send for the key, or None when it waits (counted and reported)."""
    column = outbound.timestamp
    if not outbound.timestamped:
        if versions.last_is_invalid:
            why = "its last row in the view is invalid"
            return _wait(plan, key, versions.valid[-1], why, column)
        return versions.valid[-1]
    newest_time = max(c.timestamp for c in versions.valid)
    if None in versions.invalid_times:
        why = "another version has no readable timestamp: which one is newest cannot be told"
        return _wait(plan, key, _latest(versions.valid), why, column)
    newest_invalid = max(versions.invalid_times, default=None)
    if newest_invalid is not None and newest_invalid >= newest_time:
        reason = f"its newest version ({newest_invalid.isoformat()}) is invalid"
        return _wait(plan, key, _latest(versions.valid), reason, column)
    newest = {c.content_hash: c for c in versions.valid if c.timestamp == newest_time}
    if len(newest) > 1:
        plan.count(key, "rejected", len(newest))
        plan.rejections += [
            _rejection(
                key,
                column,
                "another version has the same timestamp and different "
                "content: which one is current cannot be told",
                "conflict",
                c.body,
            )
            for c in newest.values()
        ]
        why = "its newest versions conflict"
        return _wait(plan, key, next(iter(newest.values())), why, column)
    return next(iter(newest.values()))


def _latest(valid: list[Planned]) -> Planned:
    return max(valid, key=lambda c: c.timestamp)


def _wait(plan: Plan, key: str, held_back: Planned, why: str, column: str) -> None:
    plan.count(key, "waiting")
    reason = f"not sent, waiting for a valid newest version: {why}"
    plan.rejections.append(_rejection(key, column, reason, "waiting", held_back.body))
    return None


def _in_doubt_still(
    outbound: Outbound,
    entry: Entry | None,
    versions: Versions,
    resend: bool,
    senders_gone: bool,
) -> bool:
    """The key's last mark is `sending`, its answer never came, and it is not to be sent
    (`make_plan`): an event; or a record that a push still alive may send, unless the view
    holds a newer version (the hub keeps the latest timestamp, whichever arrives last)."""
    if entry is None or entry.state != SENDING or resend:
        return False
    if outbound.at_most_once:
        return True
    if senders_gone:
        return False
    newest = max((v.timestamp for v in versions.valid if v.timestamp), default=None)
    return entry.timestamp is None or newest is None or newest <= entry.timestamp


def _in_doubt(plan: Plan, key: str, row: Planned, outbound: Outbound) -> None:
    plan.count(key, "in_doubt")
    if outbound.at_most_once:
        reason = (
            "in doubt: a push sent this and its answer never came (killed, stalled, or the "
            "answer lost), and the service offers no way to ask whether it arrived; not sent "
            "again, as a resend could store it twice (push --resend-in-doubt sends it)"
        )
    else:
        reason = (
            "in doubt: a push still alive (running now, or stalled past its lease) sent this "
            "and may still send it; the first push after it ends sends it if its answer never "
            "came (push --resend-in-doubt sends it now: the latest timestamp wins). If no push "
            "is running, SYNC_STORE must reach Postgres directly or through a session-mode "
            "pooler (docs/deployment.md)"
        )
    plan.rejections.append(_rejection(key, "", reason, "in_doubt", row.body))


def _same_record(accepted: str, planned: str) -> bool:
    """Whether two contents of a key are one record whose date-times are written with other
    offsets (`+08:00` against `+00:00`): the ledger of a push that read the views in its
    machine's zone, before `outbound_rows` read them in UTC, or of a push on another host.
    Only asked when their hashes differ, so a record written otherwise is neither a conflict
    nor sent again."""
    if not accepted:
        return False
    return _in_utc(json.loads(accepted)) == _in_utc(json.loads(planned))


def _in_utc(value: Any) -> Any:
    """`value` with each text that is a date-time with offset written in UTC."""
    if isinstance(value, dict):
        return {name: _in_utc(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_in_utc(item) for item in value]
    if isinstance(value, str):
        try:
            return validation.moment(value).astimezone(UTC).isoformat()
        except ValueError:
            return value
    return value


def _decide(
    plan: Plan, key: str, versions: Versions, entry: Entry | None, outbound: Outbound
) -> None:
    candidate = _newest(plan, key, versions, outbound)
    if candidate is None:
        return
    if entry is None or entry.state in ("failed", SENDING):
        plan.count(key, "new")
        in_doubt = entry is not None and entry.state == SENDING
        plan.to_send.append(replace(candidate, in_doubt=in_doubt))
        return
    if entry.content_hash == candidate.content_hash or _same_record(
        entry.content, candidate.content
    ):
        plan.count(key, "unchanged")
        return
    if outbound.timestamped and entry.timestamp is not None:
        if candidate.timestamp < entry.timestamp:
            plan.count(key, "stale")
            return
        if candidate.timestamp == entry.timestamp:
            plan.count(key, "rejected")
            plan.rejections.append(
                _rejection(
                    key,
                    outbound.timestamp,
                    "the service already accepted a different version with this timestamp",
                    "conflict",
                    candidate.body,
                )
            )
            return
    changed = outbound.diff(candidate, entry)
    if changed is None:
        plan.count(key, "unchanged")
        return
    plan.count(key, "changed")
    plan.to_send.append(changed)
