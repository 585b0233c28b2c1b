"""A SQLite file for what must survive a crash the moment it is written: the webhook inbox
(`pipelines/webhooks/inbox.py`) and the push's journal (`pipelines/push/journal.py`).

WAL mode with `synchronous = FULL` fsyncs the log at every commit (about 0.2 ms here): a
commit survives a killed process and a power loss, after which the other side (the hub
told 200, or the push that moves on) never repeats it. NORMAL would lose the last commits
on power loss.

Each file is named by a uuid kept in its `meta` table: ids restart with a new file, and the
lake's files record which file their ids came from.
"""

import os
import sqlite3
import uuid
from pathlib import Path


def open_durable(
    path: str | os.PathLike[str], schema: str, name: str, timeout: float
) -> tuple[sqlite3.Connection, str]:
    """The connection (autocommit, usable from any thread: callers serialize writes) and
    the file's uuid, stored under `name` in its `meta (name, value)` table."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.executescript(schema)
    db.execute("INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)", (name, str(uuid.uuid4())))
    (file_uuid,) = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return db, file_uuid
