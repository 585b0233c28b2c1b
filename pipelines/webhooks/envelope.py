"""The webhook envelope of the customer data hub spec, section 6: `event`, `timestamp`
(ISO 8601), `source` and `data` (an object) are required; `*.sync` events add `event_id`.

Only the envelope is checked. Event names, `source` values and the fields inside `data` are
the hub's to extend, so an event this code does not know is stored like any other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

REQUIRED = ("event", "timestamp", "source", "data")


class EnvelopeError(ValueError):
    """Why a signed body is not an event; kept with the body in the inbox's `rejected`."""


@dataclass(frozen=True)
class Envelope:
    """The envelope fields the inbox indexes; `data` stays in the raw body."""

    event: str
    timestamp: datetime  # UTC
    source: str
    event_id: str | None


def parse_envelope(body: bytes) -> Envelope:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EnvelopeError(f"malformed JSON: {exc}") from None
    if not isinstance(document, dict):
        raise EnvelopeError("the body is not a JSON object")
    missing = [name for name in REQUIRED if name not in document]
    if missing:
        raise EnvelopeError(f"envelope misses {', '.join(missing)}")
    for name in ("event", "timestamp", "source"):
        if not isinstance(document[name], str) or not document[name]:
            raise EnvelopeError(f"{name} is not a non-empty string")
    if not isinstance(document["data"], dict):
        raise EnvelopeError("data is not an object")
    event_id = document.get("event_id")
    if event_id is not None and not isinstance(event_id, str):
        raise EnvelopeError("event_id is not a string")
    return Envelope(
        event=document["event"],
        timestamp=_utc(document["timestamp"]),
        source=document["source"],
        event_id=event_id,
    )


def _utc(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise EnvelopeError(f"timestamp {text!r} is not ISO 8601") from None
    # The lake partitions by the event's UTC day; a time without an offset has none.
    if moment.tzinfo is None:
        raise EnvelopeError(f"timestamp {text!r} has no timezone")
    return moment.astimezone(UTC)
