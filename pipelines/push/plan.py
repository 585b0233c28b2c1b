"""Plan a push: validate each outbound row, keep the newest version per key, and compare it
with what the service has already accepted (the ledger). Nothing is sent here, so the dry
run and the real run share the same figures.

Per key (spec section 3: "the submission with the latest timestamp is the current state"):
- new: never accepted; changed: newer than the accepted version (or, without a timestamp,
  different content); unchanged: the accepted version again; stale: older than accepted,
  never sent; rejected (per row): fails validation, or shares the newest timestamp of its
  key with different content (a conflict, kept rather than guessed);
- waiting: the key's newest version is invalid, in conflict, or has no readable timestamp
  (so which one is newest cannot be told). Its older valid versions are not sent either: the
  service would take one as current though the warehouse knows it is superseded. The key is
  sent once its newest version is valid. Record types without a timestamp have the view's
  last row of a key as its newest.
"""

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipelines.push import validation
from pipelines.push.ledger import Entry, as_json

DEFAULT_CONNECTION = "default"


@dataclass(frozen=True)
class Outbound:
    """One record type: the outbound view it is read from and the columns of its key."""

    view: str
    key: tuple[str, ...]
    timestamped: bool = True
    #: The service appends each submission instead of keeping the newest per key, and offers
    #: no way to ask whether one arrived: a resend would store it twice. Each is recorded as
    #: `SENDING` before its request, and one whose answer never came is left in doubt.
    at_most_once: bool = False


#: Record keys: spec section 2 (coupon id; order id; fulfillment order_id;
#: tier, point and reservation with the customer); behavior events by the brand's event_key;
#: contacts by the three ids a profile update names; import rows by the matching attribute.
OUTBOUND: dict[str, Outbound] = {
    # In push order: imports first (they create contacts that profile updates and records
    # may name), then profiles, records, events.
    "member_import": Outbound("member_imports", ("import_key",), timestamped=False),
    "contact_profile": Outbound(
        "contact_profiles",
        ("channel_type", "external_channel_id", "external_member_id"),
        timestamped=False,
    ),
    "coupon": Outbound("coupons", ("id",)),
    "order": Outbound("orders", ("id",)),
    "order_fulfillment": Outbound("order_fulfillments", ("order_id",)),
    "membership_tier": Outbound("membership_tiers", ("source_platform_customer_id", "tier_id")),
    "point": Outbound("points", ("source_platform_customer_id", "type")),
    "reservation": Outbound("reservations", ("source_platform_customer_id", "id")),
    "behavior_event": Outbound(
        "behavior_events", ("event_key",), timestamped=False, at_most_once=True
    ),
}
OUTCOMES = ("new", "changed", "unchanged", "stale", "waiting", "in_doubt", "rejected")
#: The ledger state of an at-most-once row whose request went and whose answer did not come.
SENDING = "sending"


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

    def figures(self) -> dict[str, int]:
        return {outcome: self.counts[outcome] for outcome in OUTCOMES}


def content_hash(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(as_json(body).encode()).hexdigest()[:32]


def row_key(record_type: str, row: Mapping[str, Any]) -> str:
    columns = OUTBOUND[record_type].key
    if record_type == "member_import":
        # An import row is the attribute it matches on and that attribute's value.
        attribute = row.get("import_key")
        columns = ("import_key", attribute) if isinstance(attribute, str) else columns
    return ":".join("" if row.get(c) is None else str(row.get(c)) for c in columns)


def _validate(
    record_type: str, row: Mapping[str, Any], custom_fields: Mapping[str, Sequence[Mapping]]
) -> tuple[dict | None, list]:
    if record_type == "contact_profile":
        connection = row.get("connection") or DEFAULT_CONNECTION
        return validation.validate_profile_update(row, custom_fields.get(connection, ()))
    if record_type == "member_import":
        return validation.validate_import_row(row, row.get("import_key"))
    return validation.validate_record(record_type, row)


def _rejection(key: str, problem_field: str, reason: str, source: str, row) -> dict:
    return {
        "key": key,
        "field": problem_field,
        "reason": reason,
        "source": source,
        "row": as_json(dict(row)),
    }


def _timestamp(row: Mapping[str, Any]) -> datetime | None:
    try:
        return validation.moment(row.get("timestamp"))
    except ValueError:
        return None


def make_plan(
    record_type: str,
    rows: Iterable[Mapping[str, Any]],
    accepted: Mapping[str, Entry],
    custom_fields: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    resend_in_doubt: bool = False,
) -> Plan:
    """`custom_fields`: each connection's pulled definitions (profile updates are checked
    against the organization they go to). `resend_in_doubt`: send again the at-most-once
    rows a killed run may or may not have delivered (default: report them, send nothing)."""
    custom_fields = custom_fields or {}
    plan = Plan(record_type)
    timestamped = OUTBOUND[record_type].timestamped
    versions: dict[str, Versions] = defaultdict(Versions)
    for row in rows:
        key = row_key(record_type, row)
        body, problems = _validate(record_type, row, custom_fields)
        of_key = versions[key]
        of_key.last_is_invalid = bool(problems)
        if problems:
            plan.counts["rejected"] += 1
            plan.rejections += [
                _rejection(key, p.field, p.reason, "validation", row) for p in problems
            ]
            if timestamped:
                of_key.invalid_times.append(_timestamp(row))
            continue
        of_key.valid.append(
            Planned(
                key=key,
                body=body,
                content_hash=content_hash(body),
                timestamp=_timestamp(body) if timestamped else None,
                connection=row.get("connection") or DEFAULT_CONNECTION,
                import_key=row.get("import_key") if record_type == "member_import" else None,
                content=as_json(body),
            )
        )
    for key, of_key in versions.items():
        if of_key.valid:
            entry = accepted.get(key)
            if entry is not None and entry.state == SENDING and not resend_in_doubt:
                _in_doubt(plan, key, of_key.valid[-1])
            else:
                _decide(plan, key, of_key, entry, timestamped)
    return plan


def _newest(plan: Plan, key: str, versions: Versions, timestamped: bool) -> Planned | None:
    """The version to send for the key, or None when it waits (counted and reported)."""
    if not timestamped:
        if versions.last_is_invalid:
            return _wait(plan, key, versions.valid[-1], "its last row in the view is invalid")
        return versions.valid[-1]
    newest_time = max(c.timestamp for c in versions.valid)
    if None in versions.invalid_times:
        why = "another version has no readable timestamp: which one is newest cannot be told"
        return _wait(plan, key, _latest(versions.valid), why)
    newest_invalid = max(versions.invalid_times, default=None)
    if newest_invalid is not None and newest_invalid >= newest_time:
        reason = f"its newest version ({newest_invalid.isoformat()}) is invalid"
        return _wait(plan, key, _latest(versions.valid), reason)
    newest = {c.content_hash: c for c in versions.valid if c.timestamp == newest_time}
    if len(newest) > 1:
        plan.counts["rejected"] += len(newest)
        plan.rejections += [
            _rejection(
                key,
                "timestamp",
                "another version has the same timestamp and different "
                "content: which one is current cannot be told",
                "conflict",
                c.body,
            )
            for c in newest.values()
        ]
        return _wait(plan, key, next(iter(newest.values())), "its newest versions conflict")
    return next(iter(newest.values()))


def _latest(valid: list[Planned]) -> Planned:
    return max(valid, key=lambda c: c.timestamp)


def _wait(plan: Plan, key: str, held_back: Planned, why: str) -> None:
    plan.counts["waiting"] += 1
    reason = f"not sent, waiting for a valid newest version: {why}"
    plan.rejections.append(_rejection(key, "timestamp", reason, "waiting", held_back.body))
    return None


def _in_doubt(plan: Plan, key: str, row: Planned) -> None:
    plan.counts["in_doubt"] += 1
    reason = (
        "in doubt: a run ended while this was in flight, and the service offers no way to "
        "ask whether it arrived; not sent again, as a resend could store it twice "
        "(push --resend-in-doubt sends it)"
    )
    plan.rejections.append(_rejection(key, "", reason, "in_doubt", row.body))


def _decide(
    plan: Plan, key: str, versions: Versions, entry: Entry | None, timestamped: bool
) -> None:
    candidate = _newest(plan, key, versions, timestamped)
    if candidate is None:
        return
    if entry is None or entry.state in ("failed", SENDING):
        plan.counts["new"] += 1
        plan.to_send.append(candidate)
        return
    if entry.content_hash == candidate.content_hash:
        plan.counts["unchanged"] += 1
        return
    if timestamped and entry.timestamp is not None:
        if candidate.timestamp < entry.timestamp:
            plan.counts["stale"] += 1
            return
        if candidate.timestamp == entry.timestamp:
            plan.counts["rejected"] += 1
            plan.rejections.append(
                _rejection(
                    key,
                    "timestamp",
                    "the service already accepted a different version with this timestamp",
                    "conflict",
                    candidate.body,
                )
            )
            return
    if plan.record_type == "contact_profile":
        candidate = _only_changed_fields(candidate, json.loads(entry.content))
        if not candidate.body["data"]:
            plan.counts["unchanged"] += 1
            return
    plan.counts["changed"] += 1
    plan.to_send.append(candidate)


def _only_changed_fields(candidate: Planned, last_sent: Mapping[str, Any]) -> Planned:
    """A profile update sends only what changed since the last accepted push (a partial
    `data`, spec section 4); the ledger then keeps the merged whole for the next diff."""
    before = dict(last_sent.get("data", {}))
    after = candidate.body["data"]
    data = {k: v for k, v in after.items() if k != "custom_fields" and before.get(k) != v}
    custom_before = before.get("custom_fields") or {}
    custom = {
        k: v for k, v in (after.get("custom_fields") or {}).items() if custom_before.get(k) != v
    }
    if custom:
        data["custom_fields"] = custom
    return Planned(
        key=candidate.key,
        body=candidate.body | {"data": data},
        content_hash=candidate.content_hash,
        timestamp=None,
        connection=candidate.connection,
        content=candidate.content,
    )
