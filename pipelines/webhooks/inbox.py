"""The receiver's durable inbox, and where it lives (`open_inbox`):

- `WEBHOOK_INBOX` set: that SQLite file;
- else `SYNC_STORE` set: the deployment's Postgres (`pipelines/shared_store.py`), in tables
  scoped by the lake root (`pipelines/webhooks/postgres_inbox.py`), so receiver replicas on
  any host behind one address share one inbox and store each event once;
- else `webhooks/inbox.sqlite3` beside the lake (`inbox_path`), one SQLite file in WAL mode.

An event is committed here before the receiver answers 200 (the hub does not resend an
event it saw answered), so the inbox, not the lake, is the system of record for
webhooks until compaction copies it out. Rows are never deleted: the unique idempotency key
is what remembers, across restarts, which events were already accepted.

Durability: SQLite's `synchronous = FULL` (`pipelines/sqlite_file.py` says why); Postgres
commits synchronously, its default, for the same reason.

Row ids only grow in commit order, so "every event of day D with id <= N" is a complete,
stable set once N has been seen: the compaction's watermark. SQLite gets that from
AUTOINCREMENT and its one writer at a time; Postgres hands out ids before commit, so the
inserts of one inbox are serialised by an advisory lock (`PostgresInbox.store` says why).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pipelines.local_data import data_dir
from pipelines.shared_store import store_url
from pipelines.sqlite_file import SQLiteFile
from pipelines.webhooks.envelope import Envelope

if TYPE_CHECKING:
    from pipelines.webhooks.postgres_inbox import PostgresInbox

#: The setting that names a SQLite inbox; it wins over the shared store (`SYNC_STORE`).
INBOX_VARIABLE = "WEBHOOK_INBOX"
#: Events read at once by `events_of`.
BATCH = 5000

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


def inbox_path(lake_root: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Path:
    """`WEBHOOK_INBOX`, else `webhooks/inbox.sqlite3` in the lake's data directory
    (`pipelines/local_data.py`)."""
    env = os.environ if env is None else env
    if env.get(INBOX_VARIABLE):
        return Path(env[INBOX_VARIABLE])
    return data_dir(lake_root, env) / "webhooks" / "inbox.sqlite3"


def open_inbox(
    lake_root: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    *,
    create: bool = True,
) -> Inbox | PostgresInbox | None:
    """The inbox of the lake at `lake_root` (as the settings give it: in Postgres it is the
    inbox's scope, so the receiver and the runs must name the lake alike): `WEBHOOK_INBOX`,
    else the shared store (`SYNC_STORE`), else the SQLite file beside the lake. With
    `create=False`, None where that would be a SQLite file not made yet."""
    env = os.environ if env is None else env
    url = None if env.get(INBOX_VARIABLE) else store_url(env)
    if url is not None:
        # Imported here: it imports this module.
        from pipelines.webhooks.postgres_inbox import PostgresInbox

        return PostgresInbox(url, os.fspath(lake_root))
    path = inbox_path(lake_root, env)
    if not create and not path.exists():
        return None
    return Inbox(path)


@dataclass(frozen=True)
class Arrival:
    """One POST as it came in: what is kept of it whether it is accepted or refused."""

    idempotency_key: str | None
    user_agent: str | None
    content_type: str | None
    body: bytes
    received_at: datetime


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


def by_id(batch: Callable[[int], list[tuple]]) -> Iterator[tuple]:
    """Rows read `BATCH` at a time: `batch(after)` gives those after id `after` in id order,
    each row starting with its id."""
    after = 0
    while rows := batch(after):
        yield from rows
        after = rows[-1][0]


class WebhookInbox(Protocol):
    """What the receiver and the compaction use of an inbox, SQLite's or Postgres's."""

    uuid: str
    location: str  # for messages: no password

    def store(self, arrival: Arrival, envelope: Envelope) -> bool: ...
    def reject(self, arrival: Arrival, reason: str) -> None: ...
    def counts(self) -> dict[str, int]: ...
    def rejected(self) -> list[dict]: ...
    def day_watermarks(self) -> dict[date, int]: ...
    def events_of(self, day: date, up_to: int) -> Iterator[StoredEvent]: ...
    def close(self) -> None: ...


DAMAGED_ADVICE = (
    "The file is damaged: move it aside (the events it holds that the lake lacks stay in it, "
    "for a person to recover) and start again, which makes a new inbox; then move the "
    "lake's webhook_events and webhook_quarantine folders aside too, since they were "
    "compacted from the old one."
)


class Inbox(SQLiteFile):
    """Thread-safe (`pipelines/sqlite_file.py`); every failure to write a `StoreUnavailable`
    naming the file, which the receiver answers 500 for in one line of log."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, "the webhook inbox", INBOX_VARIABLE, SCHEMA, DAMAGED_ADVICE)

    def __enter__(self) -> Inbox:
        return self

    def __exit__(self, *_) -> None:
        self.close()

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
        with self.writing() as db:
            db.execute(
                "INSERT INTO rejected (received_at, idempotency_key, user_agent, content_type, "
                "reason, body) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    arrival.received_at.isoformat(),
                    arrival.idempotency_key,
                    arrival.user_agent,
                    arrival.content_type,
                    reason,
                    arrival.body,
                ),
            )

    def counts(self) -> dict[str, int]:
        return {
            table: self.read(f"SELECT count(*) FROM {table}")[0][0]
            for table in ("events", "rejected")
        }

    def rejected(self) -> list[dict]:
        names = ("received_at", "idempotency_key", "reason", "body")
        rows = self.read(f"SELECT {', '.join(names)} FROM rejected ORDER BY id")
        return [dict(zip(names, row, strict=True)) for row in rows]

    def day_watermarks(self) -> dict[date, int]:
        """The newest row id of each day that holds events."""
        rows = self.read("SELECT day, max(id) FROM events GROUP BY day")
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
