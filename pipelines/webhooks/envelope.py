"""The webhook envelope the customer data hub documents: `event`, `timestamp` (ISO 8601),
`source` and `data` (an object) are required; `*.sync` events add `event_id`.

Only the envelope is checked. Event names, `source` values and the fields inside `data` are
the hub's to extend, so an event this code does not know is stored like any other.

Whatever the body, `parse_envelope` answers an `Envelope` or raises `EnvelopeError` with a
reason that is valid Unicode text: the receiver keeps that reason with the body and answers
400, never 500, for a property of the body. The fields it returns can be stored in the inbox
as they are: text that is valid Unicode, a timestamp that exists in UTC. `data` is not
checked beyond being an object; what the lake cannot represent of it is quarantined at
compaction (`pipelines/webhooks/compaction.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pipelines.errors import DataRefused
from pipelines.inbox.body import Refusals, json_object

REQUIRED = ("event", "timestamp", "source", "data")
#: The envelope's text fields, checked in this order.
TEXT_FIELDS = ("event", "timestamp", "source")


class EnvelopeError(DataRefused, ValueError):
    """Why a signed body is not an event; kept with the body in the inbox's `rejected`."""


REFUSALS = Refusals(
    malformed="malformed JSON: {exc}",
    too_deep="JSON nested too deep to read",
    unreadable="JSON that Python cannot read: {exc}",
    not_an_object="the body is not a JSON object",
)


@dataclass(frozen=True)
class Envelope:
    """The envelope fields the inbox indexes; `data` stays in the raw body."""

    event: str
    timestamp: datetime  # UTC
    source: str
    event_id: str | None


def parse_envelope(body: bytes) -> Envelope:
    document = json_object(body, REFUSALS, EnvelopeError)
    missing = [name for name in REQUIRED if name not in document]
    if missing:
        raise EnvelopeError(f"envelope misses {', '.join(missing)}")
    for name in TEXT_FIELDS:
        if not isinstance(document[name], str) or not document[name]:
            raise EnvelopeError(f"{name} is not a non-empty string")
        _check_unicode(name, document[name])
    if not isinstance(document["data"], dict):
        raise EnvelopeError("data is not an object")
    event_id = document.get("event_id")
    if event_id is not None:
        if not isinstance(event_id, str):
            raise EnvelopeError("event_id is not a string")
        _check_unicode("event_id", event_id)
    return Envelope(
        event=document["event"],
        timestamp=_utc(document["timestamp"]),
        source=document["source"],
        event_id=event_id,
    )


def _check_unicode(name: str, text: str) -> None:
    """JSON's `\\ud800` escapes decode to lone surrogates, which no UTF-8 store accepts."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # The text itself is not echoed: the reason has to be storable too.
        raise EnvelopeError(f"{name} is not valid Unicode text (a lone surrogate)") from None


def _utc(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise EnvelopeError(f"timestamp {text!r} is not ISO 8601") from None
    # The lake partitions by the event's UTC day; a time without an offset has none.
    if moment.tzinfo is None:
        raise EnvelopeError(f"timestamp {text!r} has no timezone")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        # 0001-01-01T00:00+05:00 is in year 0 in UTC, 9999-12-31T23:00-05:00 in year 10000.
        raise EnvelopeError(f"timestamp {text!r} is outside years 1-9999 in UTC") from None
