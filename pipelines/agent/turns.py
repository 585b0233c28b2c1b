"""What the agent inbox keeps, whichever its storage (`pipelines/agent/inbox.py` for the
SQLite file, `pipelines/agent/postgres_inbox.py` for Postgres): the turns as stored, each with
its answer (`StoredTurn`, `StoredAnswer`), and what the receiver and the compaction use of an
inbox (`Inbox`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from pipelines.agent.reply import Answer, Route
from pipelines.inbox.storage import Stored

#: The columns of `rejected` an inbox's `rejected()` gives.
REJECTED_COLUMNS = ("received_at", "reason", "body")


@dataclass(frozen=True)
class StoredAnswer:
    answer: Answer
    answered_at: datetime


@dataclass(frozen=True)
class StoredTurn:
    id: int
    request_key: str
    received_at: datetime
    body: bytes
    answer: StoredAnswer | None


class Inbox(Stored, Protocol):
    """What the receiver and the compaction use of an agent inbox, SQLite's or Postgres's."""

    def store(self, key: str, received_at: datetime, body: bytes) -> bool: ...
    def answer_of(self, key: str) -> StoredAnswer | None: ...
    def store_answer(self, key: str, answer: Answer, answered_at: datetime) -> StoredAnswer: ...
    def reject(self, received_at: datetime, reason: str, body: bytes) -> None: ...
    def counts(self) -> dict[str, int]: ...
    def rejected(self) -> list[dict]: ...
    def newest(self) -> tuple[int, int]: ...
    def day_watermarks(
        self, after_request: int = 0, after_answer: int = 0
    ) -> dict[date, tuple[int, int]]: ...
    def turns_of(self, day: date, up_to: tuple[int, int]) -> Iterator[StoredTurn]: ...


def stored_answer(row: tuple) -> StoredAnswer | None:
    """(answered_at, reply_text, outcome, error, route) as read, or None for a turn not
    answered."""
    answered_at, reply_text, outcome, error, route = row
    if answered_at is None:
        return None
    when = answered_at if isinstance(answered_at, datetime) else datetime.fromisoformat(answered_at)
    return StoredAnswer(Answer(reply_text, outcome, error, Route.from_json(route)), when)


class AnswerKeeping:
    """What both agent inboxes (`pipelines/agent/inbox.py`, `pipelines/agent/postgres_inbox.py`)
    do alike, over their storage's `keep_rejected` and their own `answer_of`."""

    def reject(self, received_at: datetime, reason: str, body: bytes) -> None:
        """Keep a body the receiver refused, with why (every attempt is a row)."""
        self.keep_rejected({"received_at": received_at, "reason": reason, "body": body})

    def first_answer(self, key: str) -> StoredAnswer:
        """The answer stored for the request `key`: the first stored, by whichever receiver."""
        stored = self.answer_of(key)
        if stored is None:
            raise KeyError(f"no request {key} in {self.location}")
        return stored
