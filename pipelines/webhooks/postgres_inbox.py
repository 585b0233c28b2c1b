"""The webhook inbox in the deployment's Postgres (`SYNC_STORE`, `pipelines/shared_store.py`):
what `pipelines/webhooks/inbox.py` keeps in a SQLite file, kept where every receiver replica
and every run reaches it, whatever host it is on.

Three tables hold the inboxes of every lake that shares the database; each row carries its
inbox's scope, the lake root as the settings give it (`LAKE_ROOT`), so two lakes never see
each other's events, and an idempotency key is unique per scope. The inbox's uuid is a row of
the meta table per scope.

Ids come from one identity column shared by the scopes: they grow in the order inserts take
them, with gaps (a duplicate, a rolled-back insert, another scope's rows), which the
compaction's watermarks allow; see `PostgresInbox.store` for why they also become visible in
that order.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from datetime import UTC, date

from pipelines.shared_store import STORE_VARIABLE, Postgres, shown
from pipelines.webhooks.envelope import Envelope
from pipelines.webhooks.inbox import BATCH, Arrival, StoredEvent, by_id

EVENTS = "warehouse_sync_inbox_events"
REJECTED = "warehouse_sync_inbox_rejected"
META = "warehouse_sync_inbox_meta"

# `event`, `source` and `event_id` are the envelope's UTF-8 bytes: a JSON string may hold
# `\u0000`, which Postgres text cannot, and a signed event must never fail to store for it.
SETUP = (
    f"CREATE TABLE IF NOT EXISTS {META} (inbox text NOT NULL, name text NOT NULL, "
    "value text NOT NULL, PRIMARY KEY (inbox, name))",
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
    # A 200 promises the event outlives a crash of the server: a session the server or the
    # role sets to `off` commits durably again (stronger settings are left as they are).
    "DO $$ BEGIN IF current_setting('synchronous_commit') = 'off' THEN "
    "SET synchronous_commit = on; END IF; END $$",
)
INSERT_EVENT = (
    f"INSERT INTO {EVENTS} (inbox, idempotency_key, received_at, user_agent, content_type, "
    "body, event, timestamp, day, source, event_id) VALUES (%(inbox)s, %(key)s, "
    "%(received_at)s, %(user_agent)s, %(content_type)s, %(body)s, %(event)s, %(timestamp)s, "
    "%(day)s, %(source)s, %(event_id)s) ON CONFLICT (inbox, idempotency_key) DO NOTHING"
)


def insert_lock(table: str, scope: str) -> int:
    """The advisory lock the inserts of one scope into `table` queue on: any number, the same
    in every process."""
    digest = hashlib.sha256(f"{table} {scope}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def inbox_uuid(db: Postgres, meta: str, scope: str) -> str:
    """The uuid naming the scope's inbox, made on first use: the lake records which inbox its
    files were compacted from."""
    db.run(
        f"INSERT INTO {meta} (inbox, name, value) "
        "VALUES (%(inbox)s, 'inbox_uuid', %(uuid)s) ON CONFLICT DO NOTHING",
        {"inbox": scope, "uuid": str(uuid.uuid4())},
    )
    [(value,)] = db.run(
        f"SELECT value FROM {meta} WHERE inbox = %(inbox)s AND name = 'inbox_uuid'",
        {"inbox": scope},
    )
    return value


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def _text(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8")


class PostgresInbox:
    """The interface of `Inbox` (`pipelines/webhooks/inbox.py`) over the `Postgres` helper:
    thread-safe, one connection per inbox opened, used by one thread at a time, every failure
    a `StoreUnavailable` naming `SYNC_STORE`."""

    def __init__(self, url: str, scope: str) -> None:
        self.scope = scope
        self.location = f"{shown(url)} ({STORE_VARIABLE}), inbox of {scope}"
        self._insert_lock = insert_lock(EVENTS, scope)
        self._db = Postgres(url, "the webhook inbox", STORE_VARIABLE, SETUP)
        self.uuid = inbox_uuid(self._db, META, scope)

    def __enter__(self) -> PostgresInbox:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def store(self, arrival: Arrival, envelope: Envelope) -> bool:
        """Commit one event; False if its idempotency key was already stored.

        A sequence hands out ids in the order inserts ask, not the order they commit: an
        insert that took id N+1 could commit, and be read as the day's watermark, before the
        one holding N, whose event the compaction would then skip for good. The scope's
        advisory lock, held from before the id is taken until the commit is visible, makes
        the inserts of one scope commit one at a time, in id order. The commit is
        synchronous, as by default: the receiver answers 200 only after this returns, and the
        hub never resends an event answered 200.
        """
        values = {
            "inbox": self.scope,
            "key": arrival.idempotency_key,
            "received_at": arrival.received_at,
            "user_agent": arrival.user_agent,
            "content_type": arrival.content_type,
            "body": arrival.body,
            "event": _utf8(envelope.event),
            "timestamp": envelope.timestamp,
            "day": envelope.timestamp.date(),
            "source": _utf8(envelope.source),
            "event_id": _utf8(envelope.event_id),
        }
        with self._db.transaction() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (self._insert_lock,))
            return db.execute(INSERT_EVENT, values).rowcount == 1

    def reject(self, arrival: Arrival, reason: str) -> None:
        """Keep a signed delivery the receiver refused, with why (every attempt is a row)."""
        # Not `run`, which sends a statement again on a dropped connection: that would keep
        # an attempt twice.
        with self._db.transaction() as db:
            db.execute(
                f"INSERT INTO {REJECTED} (inbox, received_at, idempotency_key, user_agent, "
                "content_type, reason, body) VALUES (%(inbox)s, %(received_at)s, %(key)s, "
                "%(user_agent)s, %(content_type)s, %(reason)s, %(body)s)",
                {
                    "inbox": self.scope,
                    "received_at": arrival.received_at,
                    "key": arrival.idempotency_key,
                    "user_agent": arrival.user_agent,
                    "content_type": arrival.content_type,
                    "reason": reason,
                    "body": arrival.body,
                },
            )

    def counts(self) -> dict[str, int]:
        [(events, rejected)] = self._db.run(
            f"SELECT (SELECT count(*) FROM {EVENTS} WHERE inbox = %(inbox)s), "
            f"(SELECT count(*) FROM {REJECTED} WHERE inbox = %(inbox)s)",
            {"inbox": self.scope},
        )
        return {"events": events, "rejected": rejected}

    def rejected(self) -> list[dict]:
        rows = self._db.run(
            f"SELECT received_at, idempotency_key, reason, body FROM {REJECTED} "
            "WHERE inbox = %(inbox)s ORDER BY id",
            {"inbox": self.scope},
        )
        # As the SQLite inbox gives them: the time as ISO 8601 text in UTC.
        return [
            {
                "received_at": received_at.astimezone(UTC).isoformat(),
                "idempotency_key": key,
                "reason": reason,
                "body": bytes(body),
            }
            for received_at, key, reason, body in rows
        ]

    def day_watermarks(self) -> dict[date, int]:
        """The newest row id of each day that holds events."""
        rows = self._db.run(
            f"SELECT day, max(id) FROM {EVENTS} WHERE inbox = %(inbox)s GROUP BY day",
            {"inbox": self.scope},
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
                row_id, key, received_at.astimezone(UTC), bytes(body), _text(event),
                timestamp.astimezone(UTC), _text(source), _text(event_id),
            )  # fmt: skip
