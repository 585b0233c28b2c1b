"""The push ledger (`sync.pushed`) and the rejected rows (`sync.rejected`), both in the lake.

The ledger is append-only. Each answer of the service is written to the journal
(`pipelines/push/journal.py`) as it arrives, and the journal is moved into the ledger's files
before the ledger is read, so a run killed at any moment resumes from everything the service
had acknowledged. Rejections are a snapshot per record type, replaced each run; a rejection
seen before keeps its `first_seen`.
"""

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from pipelines.damaged import damaged_files
from pipelines.errors import Damaged
from pipelines.lake import TIMESTAMP, Lake, Stream
from pipelines.push.journal import Journal, journal_path
from pipelines.push.shared_journal import PostgresJournal
from pipelines.shared_store import store_url

PUSHED = Stream(
    "sync",
    "pushed",
    pa.schema(
        [
            ("record_type", pa.string()),
            ("key", pa.string()),
            ("timestamp", TIMESTAMP),  # the record's own, for latest-timestamp-wins
            ("content_hash", pa.string()),
            ("content", pa.string()),  # the body sent, JSON (profile diffs read it back)
            ("state", pa.string()),  # accepted; imports: submitted, then accepted or failed
            ("event_id", pa.string()),
            ("task_id", pa.int64()),
            ("updated_contact_size", pa.int64()),
            ("connection", pa.string()),
            ("pushed_at", TIMESTAMP),
        ]
    ),
    key=("record_type", "key", "pushed_at"),
)

REJECTED = Stream(
    "sync",
    "rejected",
    pa.schema(
        [
            ("record_type", pa.string()),
            ("key", pa.string()),
            ("field", pa.string()),
            ("reason", pa.string()),
            ("source", pa.string()),  # validation, conflict, or service (refused when sent)
            ("row", pa.string()),  # the row as JSON
            ("first_seen", TIMESTAMP),
            ("last_seen", TIMESTAMP),
        ]
    ),
    key=("record_type", "key", "field", "reason", "row"),
)
STREAMS = [PUSHED, REJECTED]


@dataclass(frozen=True)
class Entry:
    """The latest ledger state of one key."""

    timestamp: datetime | None
    content_hash: str
    content: str
    state: str
    task_id: int | None
    connection: str


def now() -> datetime:
    return datetime.now(UTC)


def as_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def open_journal(lake_root: str, env: Mapping[str, str] | None = None) -> Journal | PostgresJournal:
    """`PUSH_JOURNAL`'s folder where it is set; else the deployment's Postgres where
    `SYNC_STORE` is; else the folder beside the lake (`journal_path`)."""
    env = os.environ if env is None else env
    url = store_url(env)
    if url is not None and not env.get("PUSH_JOURNAL"):
        return PostgresJournal(url, lake_root)
    return Journal(journal_path(lake_root, env))


class Ledger:
    """The ledger of one lake; its journal is `open_journal`'s, or the folder given."""

    def __init__(self, lake: Lake, journal: str | Path | None = None) -> None:
        self.lake = lake
        self.journal = Journal(journal) if journal else open_journal(lake.place.uri)

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *_) -> None:
        self.journal.close()

    def compact(self) -> int:
        """Move the journal's acknowledgements into the lake; the rows moved."""
        return self.journal.compact(self.lake, PUSHED)

    def latest(self, record_type: str) -> dict[str, Entry]:
        """Each key's latest entry (by write time) of one record type, journal included."""
        self.compact()
        relation = self.lake.relation(PUSHED)
        if relation is None:
            return {}
        try:
            rows = self.lake.query(
                f"""
                SELECT key, arg_max(
                    (timestamp, content_hash, content, state, task_id, connection), pushed_at
                )
                FROM {relation}
                WHERE record_type = ?
                GROUP BY key
                """,
                [record_type],
            )
        except duckdb.Error:
            refuse_if_damaged(self.lake)
            raise
        return {key: Entry(*latest) for key, latest in rows}

    def record(self, record_type: str, entries: Iterable[dict], fsync: bool = False) -> int:
        """Write acknowledgements (each with key, content_hash, content, state, ...) to the
        journal before returning: what the service accepted is never asked of it again.
        `fsync`: on the disk before returning, for what a power loss must not undo."""
        rows = (entry | {"record_type": record_type} for entry in entries)
        return self.journal.record(rows, fsync)

    def reject(self, record_type: str, rejections: list[dict]) -> None:
        """Replace the record type's rejections; a rejection seen before keeps first_seen."""
        seen_before: dict[tuple, datetime] = {}
        path = self.lake.path(REJECTED, record_type)
        if self.lake.exists(path):
            for row in self.lake.read_table(path).to_pylist():
                seen_before[_identity(row)] = row["first_seen"]
        stamped = now()
        rows = [
            r
            | {"record_type": record_type, "last_seen": stamped}
            | {"first_seen": seen_before.get(_identity(r), stamped)}
            for r in rejections
        ]
        self.lake.write(REJECTED, record_type, rows)


class LedgerDamaged(Damaged):
    """A file of the push ledger cannot be read: it alone says what the hub accepted."""


def refuse_if_damaged(lake: Lake) -> None:
    """Raise `LedgerDamaged` naming each file of `sync.pushed` that cannot be read. Unlike
    a pulled stream's, such a file is not set aside by itself: it is the only record of
    what was sent, and without it the next push would send its rows again (behavior
    events among them stored twice)."""
    damaged = damaged_files(lake, PUSHED)
    if damaged:
        files = "; ".join(f"{path} ({reason})" for path, reason in damaged.items())
        raise LedgerDamaged(
            f"the push ledger cannot be read, so nothing was sent: {files}. Restore the "
            "file(s) from a backup of the lake; or move them out of the lake and push "
            "again, which sends their rows again (a behavior event among them may then be "
            "stored twice)"
        )


def _identity(row: dict) -> tuple:
    return row["key"], row["field"], row["reason"], row["row"]
