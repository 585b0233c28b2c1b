"""The webhook inbox in the deployment's Postgres (`SYNC_STORE`, `pipelines/state/shared_store.py`):
what `pipelines/webhooks/inbox.py` keeps in a SQLite file, kept where every receiver replica
and every run reaches it, whatever host it is on (`pipelines/inbox/storage.py`:
`PostgresInbox` says how scopes, ids and the insert lock work).

Three tables hold the inboxes of every lake that shares the database; an idempotency key is
unique per scope.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date

from pipelines.inbox import storage
from pipelines.inbox.storage import BATCH, PostgresTables, by_id, from_utf8, utf8
from pipelines.webhooks.envelope import Envelope
from pipelines.webhooks.events import REJECTED_COLUMNS, Arrival, StoredEvent

EVENTS = "warehouse_sync_inbox_events"
REJECTED = "warehouse_sync_inbox_rejected"
META = "warehouse_sync_inbox_meta"

# `event`, `source` and `event_id` are the envelope's UTF-8 bytes: a JSON string may hold
# `\u0000`, which Postgres text cannot, and a signed event must never fail to store for it.
SETUP = (
    f"CREATE TABLE IF NOT EXISTS {EVENTS} ("
    "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "inbox text NOT NULL, "
    "idempotency_key text NOT NULL, "
    "received_at timestamptz NOT NULL, "
    "user_agent text, "
    "content_type text, "
    "body bytea NOT NULL, "
    "event bytea NOT NULL, "
    "timestamp timestamptz NOT NULL, "
    "day date NOT NULL, "
    "source bytea NOT NULL, "
    "event_id bytea, "
    "UNIQUE (inbox, idempotency_key))",
    f"CREATE INDEX IF NOT EXISTS {EVENTS}_by_day ON {EVENTS} (inbox, day, id)",
    f"CREATE TABLE IF NOT EXISTS {REJECTED} ("
    "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "inbox text NOT NULL, "
    "received_at timestamptz NOT NULL, "
    "idempotency_key text, "
    "user_agent text, "
    "content_type text, "
    "reason text NOT NULL, "
    "body bytea NOT NULL)",
)
INSERT_EVENT = (
    f"INSERT INTO {EVENTS} (inbox, idempotency_key, received_at, user_agent, content_type, "
    "body, event, timestamp, day, source, event_id) VALUES (%(inbox)s, %(key)s, "
    "%(received_at)s, %(user_agent)s, %(content_type)s, %(body)s, %(event)s, %(timestamp)s, "
    "%(day)s, %(source)s, %(event_id)s) ON CONFLICT (inbox, idempotency_key) DO NOTHING"
)

TABLES = PostgresTables({"events": EVENTS, "rejected": REJECTED}, META, SETUP, REJECTED_COLUMNS)


class PostgresInbox(storage.PostgresInbox):
    """The interface of `Inbox` (`pipelines/webhooks/inbox.py`) in Postgres."""

    def __init__(self, url: str, scope: str) -> None:
        super().__init__(url, scope, TABLES, "the webhook inbox", "inbox")

    def store(self, arrival: Arrival, envelope: Envelope) -> bool:
        """Commit one event, in id order (`insert`); False if its idempotency key was already
        stored."""
        values = {
            "key": arrival.idempotency_key,
            "received_at": arrival.received_at,
            "user_agent": arrival.user_agent,
            "content_type": arrival.content_type,
            "body": arrival.body,
            "event": utf8(envelope.event),
            "timestamp": envelope.timestamp,
            "day": envelope.timestamp.date(),
            "source": utf8(envelope.source),
            "event_id": utf8(envelope.event_id),
        }
        return self.insert(INSERT_EVENT, values) == 1

    def reject(self, arrival: Arrival, reason: str) -> None:
        """Keep a signed delivery the receiver refused, with why (every attempt is a row)."""
        self.keep_rejected(arrival.rejected_row(reason))

    def newest(self) -> tuple[int]:
        """The newest row id (0 while there is none)."""
        [(top,)] = self._db.run(
            f"SELECT coalesce(max(id), 0) FROM {EVENTS} WHERE inbox = %(inbox)s",
            {"inbox": self.scope},
        )
        return (top,)

    def day_watermarks(self, after: int = 0) -> dict[date, int]:
        """The newest row id of each day that holds events with id > `after`."""
        rows = self._db.run(
            f"SELECT day, max(id) FROM {EVENTS} WHERE inbox = %(inbox)s AND id > %(after)s "
            "GROUP BY day",
            {"inbox": self.scope, "after": after},
        )
        return dict(rows)

    def events_of(self, day: date, up_to: int) -> Iterator[StoredEvent]:
        """The day's events with id <= `up_to`, oldest first, read in batches."""

        def batch(after: int) -> list[tuple]:
            return self._db.run(
                "SELECT id, idempotency_key, received_at, body, event, timestamp, source, "
                f"event_id FROM {EVENTS} WHERE inbox = %(inbox)s AND day = %(day)s "
                "AND id > %(after)s AND id <= %(up_to)s ORDER BY id LIMIT %(batch)s",
                {"inbox": self.scope, "day": day, "after": after, "up_to": up_to, "batch": BATCH},
            )

        for row_id, key, received_at, body, event, timestamp, source, event_id in by_id(batch):
            yield StoredEvent(
                row_id, key, received_at.astimezone(UTC), bytes(body), from_utf8(event),
                timestamp.astimezone(UTC), from_utf8(source), from_utf8(event_id),
            )  # fmt: skip
