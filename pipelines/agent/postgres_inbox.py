"""The agent inbox in the deployment's Postgres (`SYNC_STORE`, `pipelines/state/shared_store.py`):
what `pipelines/agent/inbox.py` keeps in a SQLite file, kept where every receiver replica and
every run reaches it. Rows carry their inbox's scope, the lake root as the settings give it
(`LAKE_ROOT`), as the webhook inbox's do (`pipelines/inbox/storage.py`: `PostgresInbox` says
how ids come to be visible in the order they were taken: the inserts of one scope queue on
an advisory lock).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime

from pipelines.agent import turns
from pipelines.agent.reply import Answer
from pipelines.agent.turns import AnswerKeeping, StoredAnswer, StoredTurn
from pipelines.inbox.storage import BATCH, PostgresInbox, PostgresTables, by_id, from_utf8, utf8

REQUESTS = "warehouse_sync_agent_requests"
ANSWERS = "warehouse_sync_agent_answers"
REJECTED = "warehouse_sync_agent_rejected"
META = "warehouse_sync_agent_meta"

SETUP = (
    f"CREATE TABLE IF NOT EXISTS {REQUESTS} ("
    "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, inbox text NOT NULL, "
    "request_key text NOT NULL, received_at timestamptz NOT NULL, day date NOT NULL, "
    "body bytea NOT NULL, UNIQUE (inbox, request_key))",
    f"CREATE INDEX IF NOT EXISTS {REQUESTS}_by_day ON {REQUESTS} (inbox, day, id)",
    # Reply texts and errors are the reply function's: bytes, since Postgres text cannot
    # hold `\u0000`, which a function may return.
    f"CREATE TABLE IF NOT EXISTS {ANSWERS} ("
    "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, inbox text NOT NULL, "
    "request_key text NOT NULL, day date NOT NULL, answered_at timestamptz NOT NULL, "
    "reply_text bytea NOT NULL, outcome text NOT NULL, error bytea, "
    "UNIQUE (inbox, request_key))",
    f"CREATE INDEX IF NOT EXISTS {ANSWERS}_by_day ON {ANSWERS} (inbox, day, id)",
    # A routed handover's `Route`, JSON (null: none); added to tables made before it was kept.
    f"ALTER TABLE {ANSWERS} ADD COLUMN IF NOT EXISTS route text",
    f"CREATE TABLE IF NOT EXISTS {REJECTED} ("
    "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, inbox text NOT NULL, "
    "received_at timestamptz NOT NULL, reason text NOT NULL, body bytea NOT NULL)",
)


def _from_store(row: tuple) -> StoredAnswer | None:
    answered_at, reply_text, outcome, error, route = row
    return turns.stored_answer(
        (
            None if answered_at is None else answered_at.astimezone(UTC),
            from_utf8(reply_text),
            outcome,
            from_utf8(error),
            route,
        )
    )


TABLES = PostgresTables(
    {"requests": REQUESTS, "answers": ANSWERS, "rejected": REJECTED},
    META,
    SETUP,
    turns.REJECTED_COLUMNS,
)


class PostgresAgentInbox(AnswerKeeping, PostgresInbox):
    """The interface of `AgentInbox` (`pipelines/agent/inbox.py`) in Postgres."""

    def __init__(self, url: str, scope: str) -> None:
        super().__init__(url, scope, TABLES, "the agent inbox", "agent inbox")

    def store(self, key: str, received_at: datetime, body: bytes) -> bool:
        return (
            self.insert(
                f"INSERT INTO {REQUESTS} (inbox, request_key, received_at, day, body) "
                "VALUES (%(inbox)s, %(key)s, %(received_at)s, %(day)s, %(body)s) "
                "ON CONFLICT (inbox, request_key) DO NOTHING",
                {"key": key, "received_at": received_at, "day": received_at.date(), "body": body},
            )
            == 1
        )

    def answer_of(self, key: str) -> StoredAnswer | None:
        rows = self._db.run(
            f"SELECT answered_at, reply_text, outcome, error, route FROM {ANSWERS} "
            "WHERE inbox = %(inbox)s AND request_key = %(key)s",
            {"inbox": self.scope, "key": key},
        )
        return _from_store(rows[0]) if rows else None

    def store_answer(self, key: str, answer: Answer, answered_at: datetime) -> StoredAnswer:
        self.insert(
            f"INSERT INTO {ANSWERS} (inbox, request_key, day, answered_at, reply_text, outcome, "
            "error, route) SELECT inbox, request_key, day, %(answered_at)s, %(reply_text)s, "
            f"%(outcome)s, %(error)s, %(route)s FROM {REQUESTS} WHERE inbox = %(inbox)s AND "
            "request_key = %(key)s ON CONFLICT (inbox, request_key) DO NOTHING",
            {
                "key": key,
                "answered_at": answered_at,
                "reply_text": utf8(answer.reply_text),
                "outcome": answer.outcome,
                "error": utf8(answer.error),
                "route": answer.route and answer.route.as_json(),
            },
        )
        return self.first_answer(key)

    def newest(self) -> tuple[int, int]:
        [(requests, answers)] = self._db.run(
            f"SELECT (SELECT coalesce(max(id), 0) FROM {REQUESTS} WHERE inbox = %(inbox)s), "
            f"(SELECT coalesce(max(id), 0) FROM {ANSWERS} WHERE inbox = %(inbox)s)",
            {"inbox": self.scope},
        )
        return requests, answers

    def day_watermarks(
        self, after_request: int = 0, after_answer: int = 0
    ) -> dict[date, tuple[int, int]]:
        rows = self._db.run(
            f"SELECT d.day, (SELECT max(id) FROM {REQUESTS} AS r WHERE r.inbox = %(inbox)s "
            f"AND r.day = d.day), coalesce((SELECT max(id) FROM {ANSWERS} AS a "
            "WHERE a.inbox = %(inbox)s AND a.day = d.day), 0) FROM "
            f"(SELECT day FROM {REQUESTS} WHERE inbox = %(inbox)s AND id > %(after_request)s "
            f"UNION SELECT day FROM {ANSWERS} WHERE inbox = %(inbox)s "
            "AND id > %(after_answer)s) AS d",
            {"inbox": self.scope, "after_request": after_request, "after_answer": after_answer},
        )
        return {day: (requests, answers) for day, requests, answers in rows}

    def turns_of(self, day: date, up_to: tuple[int, int]) -> Iterator[StoredTurn]:
        top_request, top_answer = up_to

        def batch(after: int) -> list[tuple]:
            return self._db.run(
                "SELECT r.id, r.request_key, r.received_at, r.body, a.answered_at, "
                f"a.reply_text, a.outcome, a.error, a.route FROM {REQUESTS} AS r "
                f"LEFT JOIN {ANSWERS} "
                "AS a ON a.inbox = r.inbox AND a.request_key = r.request_key "
                "AND a.id <= %(top_answer)s WHERE r.inbox = %(inbox)s AND r.day = %(day)s "
                "AND r.id > %(after)s AND r.id <= %(top_request)s ORDER BY r.id LIMIT %(batch)s",
                {
                    "inbox": self.scope,
                    "day": day,
                    "after": after,
                    "top_request": top_request,
                    "top_answer": top_answer,
                    "batch": BATCH,
                },
            )

        for row_id, key, received_at, body, *answer in by_id(batch):
            yield StoredTurn(
                row_id, key, received_at.astimezone(UTC), bytes(body), _from_store(tuple(answer))
            )
