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

from pipelines.lake import Lake
from pipelines.push.journal import Journal, journal_path
from pipelines.push.lease import Lease
from pipelines.push.shared_journal import PostgresJournal
from pipelines.state.shared_store import store_url
from pipelines.streams.pushed import PUSHED, REJECTED


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
    """The ledger of one lake; its journal is `open_journal`'s, or the folder given. With the
    push's `lease`, a `fenced` write (the mark a send is made under) is made only while the
    lease is the push's own (`Lease.fence`)."""

    def __init__(
        self, lake: Lake, journal: str | Path | None = None, lease: Lease | None = None
    ) -> None:
        self.lake = lake
        self.journal = Journal(journal) if journal else open_journal(lake.place.uri)
        self.lease = lease

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *_) -> None:
        self.journal.close()

    def compact(self) -> int:
        """Move the journal's acknowledgements into the lake; the rows moved."""
        return self.journal.compact(self.lake, PUSHED)

    def latest(self, record_type: str, state: str | None = None) -> dict[str, Entry]:
        """Each key's latest entry (by write time) of one record type, journal included;
        of the keys whose latest entry is in `state` only, where given."""
        self.compact()
        relation = self.lake.relation(PUSHED)
        if relation is None:
            return {}
        rows = self.lake.query(
            f"""
            SELECT key, latest FROM (
                SELECT key, arg_max(
                    (timestamp, content_hash, content, state, task_id, connection), pushed_at
                ) AS latest
                FROM {relation}
                WHERE record_type = $record_type
                GROUP BY key
            )
            WHERE $state IS NULL OR latest[4] = $state
            """,
            {"record_type": record_type, "state": state},
        )
        return {key: Entry(*latest) for key, latest in rows}

    def record(
        self, record_type: str, entries: Iterable[dict], fsync: bool = False, fenced: bool = False
    ) -> int:
        """Write acknowledgements (each with key, content_hash, content, state, ...) to the
        journal before returning: what the service accepted is never asked of it again.
        `fsync`: on the disk before returning, for what a power loss must not undo.
        `fenced`: only under the push's lease (a `sending` mark, before its request). An
        answer is written whatever the lease: it only tells the next push what was sent."""
        rows = (entry | {"record_type": record_type} for entry in entries)
        return self.journal.record(rows, fsync, self.lease if fenced else None)

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


def rejected_now(lake: Lake, record_type: str, limit: int) -> list[dict]:
    """The newest `limit` of the rows `sync.rejected` holds now for the record type (what
    the last push left)."""
    path = lake.path(REJECTED, record_type)
    if not lake.exists(path):
        return []
    table = lake.read_table(path)
    newest = table.sort_by([("first_seen", "descending"), ("key", "descending")])
    return newest.slice(0, limit).to_pylist()


def _identity(row: dict) -> tuple:
    return row["key"], row["field"], row["reason"], row["row"]
