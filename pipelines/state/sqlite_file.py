"""A durable SQLite file shared by the threads of one process: the inboxes' local form
(`pipelines/inbox/storage.py`: `SQLiteInbox`), as `Postgres`
(`pipelines/state/shared_store.py`) is their shared one.

One connection, its statements serialised by a lock (SQLite has one writer anyway, and a
Python lock queues fairly where SQLite's busy handler would sleep). WAL, and
`synchronous = FULL`, which fsyncs the WAL at every commit: an inbox commits before the
sender is told 200, and NORMAL could lose the last commits on power loss or an OS crash.
Every failure, opening included (a full disk, a folder that cannot be written), is a
`StoreUnavailable` naming the file and its setting; a damaged file is `FileDamaged`, a path
under a file `FileMisplaced`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipelines.errors import Damaged, SetupError
from pipelines.state.shared_store import StoreUnavailable, unavailable

#: What SQLite says of a file that is not, or no longer, a whole database.
DAMAGED_WORDS = ("file is not a database", "malformed")


class FileDamaged(Damaged):
    """The file is damaged: what it holds that the lake lacks is only there, so a person
    moves it aside, as the message says."""


class FileMisplaced(SetupError):
    """The file's setting names a path under a file: no folder can be made there."""


class SQLiteFile:
    def __init__(
        self, path: str | os.PathLike[str], what: str, variable: str, schema: str, damaged: str
    ) -> None:
        """`what` names the store in messages ("the webhook inbox"), `variable` the setting
        that places it; `damaged` is what to do when the file is damaged."""
        self.path = Path(path)
        self.location = str(self.path)
        self.what = what
        self.variable = variable
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=10.0
            )
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")
            self._db.executescript(
                "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
                + schema
            )
            # Names this store: the lake records which one its files were compacted from.
            self._db.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES ('inbox_uuid', ?)",
                (str(uuid.uuid4()),),
            )
            self.uuid: str = self._db.execute(
                "SELECT value FROM meta WHERE name = 'inbox_uuid'"
            ).fetchone()[0]
        except (OSError, sqlite3.Error) as exc:
            if isinstance(exc, sqlite3.DatabaseError) and any(
                words in str(exc) for words in DAMAGED_WORDS
            ):
                raise unavailable(
                    what, self.location, variable, exc, damaged, FileDamaged
                ) from None
            # A file where its folder should be: the setting names a place that cannot work.
            misplaced = isinstance(exc, NotADirectoryError | FileExistsError)
            error = FileMisplaced if misplaced else StoreUnavailable
            raise unavailable(what, self.location, variable, exc, error=error) from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock, for statements that write."""
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise unavailable(self.what, self.location, self.variable, exc) from None

    def read(self, statement: str, values: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(statement, values).fetchall()
