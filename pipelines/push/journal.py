"""The push's write-ahead journal: every answer of the data hub committed the moment it
arrives, before the worker that got it sends anything else.

A record the hub accepted, an import task it started or finished: each is one row here,
committed (`pipelines/durable.py`: it survives a killed process and a power loss) before the
next request of that worker goes. A push killed at any moment has therefore
lost no acknowledgement; what it may send again is only what was in flight when it died.

The journal is not the ledger: `compact` moves its rows into the lake's `sync/pushed` files,
and `Ledger` does that before it reads, so the lake stays the state. A compacted file is named
after this journal and the newest row id it holds (`journal-<uuid>-<id>`), which makes the
move idempotent: a crash after the file is written and before the rows are deleted leaves a
file whose name says those rows are in the lake, and the next compaction only deletes them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from pipelines.durable import open_durable
from pipelines.lake import Lake, Stream

#: The ledger's columns the journal keeps; `timestamp` and `pushed_at` as ISO 8601 text.
COLUMNS = (
    "record_type",
    "key",
    "timestamp",
    "content_hash",
    "content",
    "state",
    "event_id",
    "task_id",
    "updated_contact_size",
    "connection",
    "pushed_at",
)
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    {", ".join(COLUMNS)}
);
"""
FILE_PREFIX = "journal"
_TIMES = ("timestamp", "pushed_at")


def journal_path(lake_root: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Path:
    """`PUSH_JOURNAL`, else `push/journal.sqlite3` in the data directory beside the lake."""
    env = os.environ if env is None else env
    if env.get("PUSH_JOURNAL"):
        return Path(env["PUSH_JOURNAL"])
    return Path(lake_root).parent / "push" / "journal.sqlite3"


class Journal:
    """Thread-safe: the push's workers share one connection, writes serialized by a lock."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        # A compaction in another process holds the write lock for the time of one file.
        self._db, file_uuid = open_durable(self.path, SCHEMA, "journal_uuid", timeout=60.0)
        # Part of the lake's file names, which take lowercase letters, digits and '-'.
        self.uuid = file_uuid.replace("-", "")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def record(self, entries: Iterable[Mapping]) -> int:
        """Commit entries (ledger rows) in one transaction; returns how many."""
        pushed_at = datetime.now(UTC).isoformat()
        rows = [
            tuple(_as_text(entry.get(c)) for c in COLUMNS[:-1]) + (pushed_at,) for entry in entries
        ]
        if not rows:
            return 0
        placeholders = ", ".join("?" for _ in COLUMNS)
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany(
                f"INSERT INTO entries ({', '.join(COLUMNS)}) VALUES ({placeholders})", rows
            )
            self._db.execute("COMMIT")
        return len(rows)

    def compact(self, lake: Lake, stream: Stream) -> int:
        """Move every journaled row into one file of `stream`; returns the rows moved."""
        prefix = f"{FILE_PREFIX}-{self.uuid}-"
        with self._lock:
            # Held through the file's write: two processes never write the same rows twice.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                landed = max(
                    (
                        int(path.stem.removeprefix(prefix))
                        for path in lake.stream_dir(stream).glob(f"{prefix}*.parquet")
                    ),
                    default=0,
                )
                cursor = self._db.execute(
                    f"SELECT id, {', '.join(COLUMNS)} FROM entries WHERE id > ? ORDER BY id",
                    (landed,),
                )
                rows = [dict(zip(("id", *COLUMNS), row, strict=True)) for row in cursor]
                if rows:
                    top = rows[-1]["id"]
                    lake.write(stream, f"{prefix}{top}", (_as_ledger_row(r) for r in rows))
                    landed = top
                self._db.execute("DELETE FROM entries WHERE id <= ?", (landed,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return len(rows)


def _as_text(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else value


def _as_ledger_row(row: dict) -> dict:
    del row["id"]
    for name in _TIMES:
        if row[name] is not None:
            row[name] = datetime.fromisoformat(row[name])
    return row
