"""The agent's durable inbox: every turn the service sends, kept once before it is answered,
and each answer beside it. It lives by the rules the webhook inbox's does
(`pipelines/inbox/storage.py`, `open_agent_inbox`):

- `AGENT_INBOX` set: that SQLite file;
- else `SYNC_STORE` set: the deployment's Postgres (`pipelines/agent/postgres_inbox.py`),
  scoped by the lake root, so receivers on any host behind one address share it;
- else `agent/inbox.sqlite3` beside the lake.

Two append-only tables: `requests` (one row per request key, the day it was first received)
and `answers` (at most one per request, carrying its request's day). A request is committed
before its reply is asked for, its answer before the service is told it. Rows are never
changed or deleted, and ids only grow in commit order, so "the day's requests with id <= R
and their answers with id <= A" is a complete, stable set once (R, A) has been seen: the
compaction's watermark (`pipelines/agent/compaction.py`). A request whose receiver died
before answering lands without an answer; the service's retry answers it, and the day is
compacted again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import date, datetime

from pipelines.agent.postgres_inbox import PostgresAgentInbox
from pipelines.agent.reply import Answer
from pipelines.agent.turns import (
    REJECTED_COLUMNS,
    AnswerKeeping,
    StoredAnswer,
    StoredTurn,
    stored_answer,
)
from pipelines.inbox.storage import BATCH, Place, SQLiteInbox, by_id

#: The setting that names a SQLite inbox; it wins over the shared store (`SYNC_STORE`).
INBOX_VARIABLE = "AGENT_INBOX"

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    request_key TEXT NOT NULL UNIQUE,   -- pipelines/agent/request.py: request_key
    received_at TEXT NOT NULL,          -- UTC, ISO 8601
    day TEXT NOT NULL,                  -- UTC day of received_at: the lake partition
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_by_day ON requests (day, id);
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    request_key TEXT NOT NULL UNIQUE,
    day TEXT NOT NULL,                  -- its request's
    answered_at TEXT NOT NULL,
    reply_text TEXT NOT NULL,
    outcome TEXT NOT NULL,
    error TEXT,
    route TEXT                          -- a routed handover's `Route`, JSON; null: none
);
CREATE INDEX IF NOT EXISTS answers_by_day ON answers (day, id);
CREATE TABLE IF NOT EXISTS rejected (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at TEXT NOT NULL,
    reason TEXT NOT NULL,
    body BLOB NOT NULL
);
"""
DAMAGED_ADVICE = (
    "The file is damaged: move it aside (the turns it holds that the lake lacks stay in it, "
    "for a person to recover) and start again, which makes a new inbox; then move the "
    "lake's conversation/agent_requests and agent_messages folders aside too, since they "
    "were compacted from the old one."
)


class AgentInbox(AnswerKeeping, SQLiteInbox):
    """The SQLite inbox (`pipelines/inbox/storage.py`: `SQLiteInbox`)."""

    TABLES = ("requests", "answers", "rejected")
    REJECTED = REJECTED_COLUMNS

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, "the agent inbox", INBOX_VARIABLE, SCHEMA, DAMAGED_ADVICE)
        # A file made before answers kept their route gets the column (null: no route).
        if "route" not in {column for _, column, *_ in self.read("PRAGMA table_info(answers)")}:
            with self.writing() as db:
                db.execute("ALTER TABLE answers ADD COLUMN route TEXT")

    def store(self, key: str, received_at: datetime, body: bytes) -> bool:
        """Commit one request; False if its key was already stored."""
        with self.writing() as db:
            cursor = db.execute(
                "INSERT INTO requests (request_key, received_at, day, body) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (request_key) DO NOTHING",
                (key, received_at.isoformat(), received_at.date().isoformat(), body),
            )
            return cursor.rowcount == 1

    def answer_of(self, key: str) -> StoredAnswer | None:
        rows = self.read(
            "SELECT answered_at, reply_text, outcome, error, route FROM answers "
            "WHERE request_key = ?",
            (key,),
        )
        return stored_answer(rows[0]) if rows else None

    def store_answer(self, key: str, answer: Answer, answered_at: datetime) -> StoredAnswer:
        """Commit the request's answer unless one is stored already (two receivers answering
        one request at once): the answer stored first is the one given, by both."""
        with self.writing() as db:
            db.execute(
                "INSERT INTO answers (request_key, day, answered_at, reply_text, outcome, error, "
                "route) SELECT request_key, day, ?, ?, ?, ?, ? FROM requests "
                "WHERE request_key = ? ON CONFLICT (request_key) DO NOTHING",
                (
                    answered_at.isoformat(),
                    answer.reply_text,
                    answer.outcome,
                    answer.error,
                    answer.route and answer.route.as_json(),
                    key,
                ),
            )
        return self.first_answer(key)

    def newest(self) -> tuple[int, int]:
        """The newest request id and the newest answer id (0 while there is none)."""
        [tops] = self.read(
            "SELECT (SELECT coalesce(max(id), 0) FROM requests), "
            "(SELECT coalesce(max(id), 0) FROM answers)"
        )
        return tops

    def day_watermarks(
        self, after_request: int = 0, after_answer: int = 0
    ) -> dict[date, tuple[int, int]]:
        """Per day with a request id > `after_request` or an answer id > `after_answer` (the
        days stored since, found by id): its newest request id and its newest answer id."""
        rows = self.read(
            "SELECT day, (SELECT max(id) FROM requests WHERE day = d.day), "
            "coalesce((SELECT max(id) FROM answers WHERE day = d.day), 0) FROM "
            "(SELECT day FROM requests WHERE id > ? UNION SELECT day FROM answers WHERE id > ?) "
            "AS d",
            (after_request, after_answer),
        )
        return {date.fromisoformat(day): (requests, answers) for day, requests, answers in rows}

    def turns_of(self, day: date, up_to: tuple[int, int]) -> Iterator[StoredTurn]:
        """The day's requests with id <= `up_to[0]`, oldest first, each with its answer if
        that has id <= `up_to[1]`; read in batches."""
        top_request, top_answer = up_to

        def batch(after: int) -> list[tuple]:
            return self.read(
                "SELECT r.id, r.request_key, r.received_at, r.body, a.answered_at, "
                "a.reply_text, a.outcome, a.error, a.route FROM requests AS r "
                "LEFT JOIN answers AS a ON a.request_key = r.request_key AND a.id <= ? "
                "WHERE r.day = ? AND r.id > ? AND r.id <= ? ORDER BY r.id LIMIT ?",
                (top_answer, day.isoformat(), after, top_request, BATCH),
            )

        for row_id, key, received_at, body, *answer in by_id(batch):
            yield StoredTurn(
                row_id, key, datetime.fromisoformat(received_at), body, stored_answer(answer)
            )


#: Where the inbox lives (`pipelines/inbox/storage.py`: `Place`): `inbox_path(lake_root)` is
#: `AGENT_INBOX`, else `agent/inbox.sqlite3` in the lake's data directory;
#: `open_agent_inbox(lake_root, create=True)` the inbox, `AGENT_INBOX`'s file, else the
#: shared store's (`SYNC_STORE`), else the file beside the lake.
PLACE = Place(INBOX_VARIABLE, "agent", AgentInbox, PostgresAgentInbox)
inbox_path = PLACE.path
open_agent_inbox = PLACE.open
