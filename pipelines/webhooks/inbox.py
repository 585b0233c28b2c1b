"""The receiver's durable inbox, and where it lives (`open_inbox`, by the rules of
`pipelines/inbox/storage.py`):

- `WEBHOOK_INBOX` set: that SQLite file;
- else `SYNC_STORE` set: the deployment's Postgres, in tables scoped by the lake root
  (`pipelines/webhooks/postgres_inbox.py`), so receiver replicas on any host behind one
  address share one inbox and store each event once;
- else `webhooks/inbox.sqlite3` beside the lake (`inbox_path`), one SQLite file in WAL mode.

An event is committed here before the receiver answers 200 (the hub does not resend an
event it saw answered), so the inbox, not the lake, is the system of record for
webhooks until compaction copies it out. Rows are never deleted: the unique idempotency key
is what remembers, across restarts, which events were already accepted. Row ids only grow in
commit order: the compaction's watermark (`pipelines/inbox/storage.py` says how).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import date, datetime

from pipelines.inbox.storage import BATCH, Place, SQLiteInbox, by_id
from pipelines.webhooks.envelope import Envelope
from pipelines.webhooks.events import REJECTED_COLUMNS, Arrival, StoredEvent
from pipelines.webhooks.postgres_inbox import PostgresInbox

#: The setting that names a SQLite inbox; it wins over the shared store (`SYNC_STORE`).
INBOX_VARIABLE = "WEBHOOK_INBOX"

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL UNIQUE,  -- Service-Idempotency-Key
    received_at TEXT NOT NULL,             -- UTC, ISO 8601
    user_agent TEXT,
    content_type TEXT,
    body BLOB NOT NULL,                    -- the raw bytes the signature covers
    event TEXT NOT NULL,
    timestamp TEXT NOT NULL,               -- the envelope's, in UTC
    day TEXT NOT NULL,                     -- UTC day of `timestamp`: the lake partition
    source TEXT NOT NULL,
    event_id TEXT                          -- *.sync events
);
CREATE INDEX IF NOT EXISTS events_by_day ON events (day, id);
CREATE TABLE IF NOT EXISTS rejected (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at TEXT NOT NULL,
    idempotency_key TEXT,
    user_agent TEXT,
    content_type TEXT,
    reason TEXT NOT NULL,
    body BLOB NOT NULL
);
"""


DAMAGED_ADVICE = (
    "The file is damaged: move it aside (the events it holds that the lake lacks stay in it, "
    "for a person to recover) and start again, which makes a new inbox; then move the "
    "lake's webhook_events and webhook_quarantine folders aside too, since they were "
    "compacted from the old one."
)


class Inbox(SQLiteInbox):
    """The SQLite inbox (`pipelines/inbox/storage.py`: `SQLiteInbox`)."""

    TABLES = ("events", "rejected")
    REJECTED = REJECTED_COLUMNS

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, "the webhook inbox", INBOX_VARIABLE, SCHEMA, DAMAGED_ADVICE)

    def store(self, arrival: Arrival, envelope: Envelope) -> bool:
        """Commit one event; False if its idempotency key was already stored."""
        with self.writing() as db:
            cursor = db.execute(
                "INSERT INTO events (idempotency_key, received_at, user_agent, content_type, "
                "body, event, timestamp, day, source, event_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (idempotency_key) DO NOTHING",
                (
                    arrival.idempotency_key,
                    arrival.received_at.isoformat(),
                    arrival.user_agent,
                    arrival.content_type,
                    arrival.body,
                    envelope.event,
                    envelope.timestamp.isoformat(),
                    envelope.timestamp.date().isoformat(),
                    envelope.source,
                    envelope.event_id,
                ),
            )
            return cursor.rowcount == 1

    def reject(self, arrival: Arrival, reason: str) -> None:
        """Keep a signed delivery the receiver refused, with why (every attempt is a row)."""
        self.keep_rejected(arrival.rejected_row(reason))

    def newest(self) -> tuple[int]:
        """The newest row id (0 while there is none)."""
        [(top,)] = self.read("SELECT coalesce(max(id), 0) FROM events")
        return (top,)

    def day_watermarks(self, after: int = 0) -> dict[date, int]:
        """The newest row id of each day that holds events with id > `after`: the days
        stored since, read by id, not every day."""
        rows = self.read("SELECT day, max(id) FROM events WHERE id > ? GROUP BY day", (after,))
        return {date.fromisoformat(day): top for day, top in rows}

    def events_of(self, day: date, up_to: int) -> Iterator[StoredEvent]:
        """The day's events with id <= `up_to`, oldest first, read in batches."""

        def batch(after: int) -> list[tuple]:
            return self.read(
                "SELECT id, idempotency_key, received_at, body, event, timestamp, source, "
                "event_id FROM events WHERE day = ? AND id > ? AND id <= ? ORDER BY id LIMIT ?",
                (day.isoformat(), after, up_to, BATCH),
            )

        for row_id, key, received_at, body, event, timestamp, source, event_id in by_id(batch):
            yield StoredEvent(
                row_id, key, datetime.fromisoformat(received_at), body, event,
                datetime.fromisoformat(timestamp), source, event_id,
            )  # fmt: skip


#: Where the inbox lives (`pipelines/inbox/storage.py`: `Place`): `inbox_path(lake_root)` is
#: `WEBHOOK_INBOX`, else `webhooks/inbox.sqlite3` in the lake's data directory;
#: `open_inbox(lake_root, create=True)` the inbox, `WEBHOOK_INBOX`'s file, else the shared
#: store's (`SYNC_STORE`), else the file beside the lake.
PLACE = Place(INBOX_VARIABLE, "webhooks", Inbox, PostgresInbox)
inbox_path = PLACE.path
open_inbox = PLACE.open
