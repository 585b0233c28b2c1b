"""What the webhook inbox keeps, whichever its storage (`pipelines/webhooks/inbox.py` for the
SQLite file, `pipelines/webhooks/postgres_inbox.py` for Postgres): the deliveries as they came
(`Arrival`), the events as stored (`StoredEvent`), and what the receiver and the compaction
use of an inbox (`WebhookInbox`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from pipelines.inbox.storage import Stored
from pipelines.webhooks.envelope import Envelope


@dataclass(frozen=True)
class Arrival:
    """One POST as it came in: what is kept of it whether it is accepted or refused."""

    idempotency_key: str | None
    user_agent: str | None
    content_type: str | None
    body: bytes
    received_at: datetime

    def rejected_row(self, reason: str) -> dict[str, object]:
        """Its row of the inbox's `rejected` table, refused for `reason`."""
        return {
            "received_at": self.received_at,
            "idempotency_key": self.idempotency_key,
            "user_agent": self.user_agent,
            "content_type": self.content_type,
            "reason": reason,
            "body": self.body,
        }


@dataclass(frozen=True)
class StoredEvent:
    id: int
    idempotency_key: str
    received_at: datetime
    body: bytes
    event: str
    timestamp: datetime
    source: str
    event_id: str | None


#: The columns of `rejected` an inbox's `rejected()` gives.
REJECTED_COLUMNS = ("received_at", "idempotency_key", "reason", "body")


class WebhookInbox(Stored, Protocol):
    """What the receiver and the compaction use of an inbox, SQLite's or Postgres's."""

    def store(self, arrival: Arrival, envelope: Envelope) -> bool: ...
    def reject(self, arrival: Arrival, reason: str) -> None: ...
    def counts(self) -> dict[str, int]: ...
    def rejected(self) -> list[dict]: ...
    def newest(self) -> tuple[int]: ...
    def day_watermarks(self, after: int = 0) -> dict[date, int]: ...
    def events_of(self, day: date, up_to: int) -> Iterator[StoredEvent]: ...
