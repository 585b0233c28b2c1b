"""Where a receiver's inbox lives (`Place`), and what its two storages share: the SQLite file
(`SQLiteInbox`) and the deployment's Postgres (`PostgresInbox`). A receiver's inbox module
(`pipelines/webhooks/inbox.py`, `pipelines/agent/inbox.py`) adds its tables and rows.

An inbox is, by its receiver's setting (`Place.variable`):

- that setting set: that SQLite file;
- else `SYNC_STORE` set: the deployment's Postgres (`pipelines/state/shared_store.py`), in tables
  scoped by the lake root, so receiver replicas on any host behind one address share one
  inbox and store each row once;
- else `<folder>/inbox.sqlite3` in the lake's data directory (`pipelines/state/local_data.py`).

Rows are never changed or deleted, and ids only grow in commit order, so "every row of day D
with id <= N" is a complete, stable set once N has been seen: the compaction's watermark.
SQLite gets that from AUTOINCREMENT and its one writer at a time; Postgres hands out ids
before commit, so the inserts of one inbox are serialised by an advisory lock
(`PostgresInbox.insert` says why).

Durability: SQLite's `synchronous = FULL` (`pipelines/state/sqlite_file.py` says why); Postgres
commits synchronously, its default, for the same reason.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Generic, Protocol, Self, TypeVar

from pipelines.state.local_data import data_dir
from pipelines.state.shared_store import STORE_VARIABLE, Postgres, shown, store_url
from pipelines.state.sqlite_file import SQLiteFile

#: Rows read at once by `by_id`'s callers.
BATCH = 5000

S = TypeVar("S")
P = TypeVar("P")


class Stored(Protocol):
    """What every inbox is, whichever its storage."""

    uuid: str
    location: str  # for messages: no password

    def __enter__(self) -> Self: ...
    def __exit__(self, *_) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Place(Generic[S, P]):
    """Where one receiver's inbox lives: `variable` names a SQLite file and wins over the
    shared store (`SYNC_STORE`); else, without it, `<folder>/inbox.sqlite3` beside the lake.
    The inbox is made by `sqlite(path)` or `postgres(url, scope)`."""

    variable: str
    folder: str
    sqlite: Callable[[Path], S]
    postgres: Callable[[str, str], P]

    def path(self, lake_root: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Path:
        """The setting, else `<folder>/inbox.sqlite3` in the lake's data directory."""
        env = os.environ if env is None else env
        if env.get(self.variable):
            return Path(env[self.variable])
        return data_dir(lake_root, env) / self.folder / "inbox.sqlite3"

    def open(
        self,
        lake_root: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        *,
        create: bool = True,
    ) -> S | P | None:
        """The inbox of the lake at `lake_root` (as the settings give it: in Postgres it is
        the inbox's scope, so the receiver and the runs must name the lake alike). With
        `create=False`, None where that would be a SQLite file not made yet."""
        env = os.environ if env is None else env
        url = None if env.get(self.variable) else store_url(env)
        if url is not None:
            return self.postgres(url, os.fspath(lake_root))
        path = self.path(lake_root, env)
        if not create and not path.exists():
            return None
        return self.sqlite(path)


def by_id(batch: Callable[[int], list[tuple]]) -> Iterator[tuple]:
    """Rows read `BATCH` at a time: `batch(after)` gives those after id `after` in id order,
    each row starting with its id."""
    after = 0
    while rows := batch(after):
        yield from rows
        after = rows[-1][0]


class SQLiteInbox(SQLiteFile):
    """An inbox in a SQLite file: thread-safe (`pipelines/state/sqlite_file.py`), every failure to
    write a `StoreUnavailable` naming the file, which a receiver answers in one line of log.
    A subclass names its tables (`TABLES`, counted in that order) and the columns of its
    `rejected` table that `rejected()` gives (`REJECTED`)."""

    TABLES: ClassVar[tuple[str, ...]]
    REJECTED: ClassVar[tuple[str, ...]]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def keep_rejected(self, row: Mapping[str, object]) -> None:
        """Keep a body the receiver refused, with why (every attempt is a row); times as ISO
        8601 text."""
        values = tuple(v.isoformat() if isinstance(v, datetime) else v for v in row.values())
        with self.writing() as db:
            db.execute(
                f"INSERT INTO rejected ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                values,
            )

    def counts(self) -> dict[str, int]:
        return {table: self.read(f"SELECT count(*) FROM {table}")[0][0] for table in self.TABLES}

    def rejected(self) -> list[dict]:
        names = self.REJECTED
        rows = self.read(f"SELECT {', '.join(names)} FROM rejected ORDER BY id")
        return [dict(zip(names, row, strict=True)) for row in rows]


def meta_table(name: str) -> str:
    """The statement making a Postgres inbox's table of named values per scope."""
    return (
        f"CREATE TABLE IF NOT EXISTS {name} (inbox text NOT NULL, name text NOT NULL, "
        "value text NOT NULL, PRIMARY KEY (inbox, name))"
    )


#: A 200 promises the row outlives a crash of the server: a session the server or the role
#: sets to `off` commits durably again (stronger settings are left as they are).
DURABLE_COMMITS = (
    "DO $$ BEGIN IF current_setting('synchronous_commit') = 'off' THEN "
    "SET synchronous_commit = on; END IF; END $$"
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


def utf8(text: str | None) -> bytes | None:
    """Text as the Postgres inboxes keep what a caller or a function wrote: UTF-8 bytes, since
    Postgres text cannot hold `\\u0000`, and a row must never fail to store for it."""
    return None if text is None else text.encode("utf-8")


def from_utf8(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8")


@dataclass(frozen=True)
class PostgresTables:
    """A Postgres inbox's tables: `counted` (name in `counts()` -> table, the first being the
    one whose inserts queue on the scope's lock, and `rejected` the refused bodies'), `meta`,
    the statements making its own tables (`setup`), and the columns of `rejected` that
    `rejected()` gives (`rejected_columns`, as `SQLiteInbox.REJECTED`)."""

    counted: Mapping[str, str]
    meta: str
    setup: tuple[str, ...]
    rejected_columns: tuple[str, ...]


class PostgresInbox:
    """An inbox in the deployment's Postgres (`SYNC_STORE`), over the `Postgres` helper:
    thread-safe, one connection per inbox opened, used by one thread at a time, every failure
    a `StoreUnavailable` naming `SYNC_STORE`.

    Tables hold the inboxes of every lake that shares the database; each row carries its
    inbox's scope, the lake root as the settings give it (`LAKE_ROOT`), so two lakes never see
    each other's rows. The inbox's uuid is a row of the meta table per scope. Ids come from
    identity columns shared by the scopes: they grow in the order inserts take them, with gaps
    (a duplicate, a rolled-back insert, another scope's rows), which the compaction's
    watermarks allow.
    """

    def __init__(self, url: str, scope: str, tables: PostgresTables, what: str, named: str) -> None:
        """`what` names the store in messages ("the webhook inbox"), `named` its location's
        words ("inbox")."""
        self.scope = scope
        self.tables = tables
        self.location = f"{shown(url)} ({STORE_VARIABLE}), {named} of {scope}"
        self._insert_lock = insert_lock(next(iter(tables.counted.values())), scope)
        setup = (meta_table(tables.meta), *tables.setup, DURABLE_COMMITS)
        self._db = Postgres(url, what, STORE_VARIABLE, setup)
        self.uuid = inbox_uuid(self._db, tables.meta, scope)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def insert(self, statement: str, values: Mapping[str, object]) -> int:
        """One insert of the scope (`%(inbox)s` is its scope), its id taken and committed under
        the scope's lock: the rows it inserted.

        A sequence hands out ids in the order inserts ask, not the order they commit: an
        insert that took id N+1 could commit, and be read as the day's watermark, before the
        one holding N, whose row the compaction would then skip for good. The scope's
        advisory lock, held from before the id is taken until the commit is visible, makes
        the inserts of one scope commit one at a time, in id order. The commit is
        synchronous, as by default: a receiver answers only after this returns, and a sender
        never resends what was answered.
        """
        with self._db.transaction() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (self._insert_lock,))
            return db.execute(statement, {"inbox": self.scope, **values}).rowcount

    def keep_rejected(self, row: Mapping[str, object]) -> None:
        """Keep a body the receiver refused, with why (every attempt is a row)."""
        columns = ", ".join(row)
        values = ", ".join(f"%({name})s" for name in row)
        # Not `run`, which sends a statement again on a dropped connection: that would keep
        # an attempt twice.
        table = self.tables.counted["rejected"]
        with self._db.transaction() as db:
            db.execute(
                f"INSERT INTO {table} (inbox, {columns}) VALUES (%(inbox)s, {values})",
                {"inbox": self.scope, **row},
            )

    def counts(self) -> dict[str, int]:
        counted = ", ".join(
            f"(SELECT count(*) FROM {table} WHERE inbox = %(inbox)s)"
            for table in self.tables.counted.values()
        )
        [row] = self._db.run(f"SELECT {counted}", {"inbox": self.scope})
        return dict(zip(self.tables.counted, row, strict=True))

    def rejected(self) -> list[dict]:
        names = self.tables.rejected_columns
        table = self.tables.counted["rejected"]
        rows = self._db.run(
            f"SELECT {', '.join(names)} FROM {table} WHERE inbox = %(inbox)s ORDER BY id",
            {"inbox": self.scope},
        )
        return [
            {name: _as_sqlite_gives(name, value) for name, value in zip(names, row, strict=True)}
            for row in rows
        ]


def _as_sqlite_gives(name: str, value: object) -> object:
    """A value of `rejected` as the SQLite inbox gives it: the time as ISO 8601 text in UTC,
    the body bytes."""
    if name == "received_at":
        return value.astimezone(UTC).isoformat()  # type: ignore[attr-defined]
    if name == "body":
        return bytes(value)  # type: ignore[arg-type]
    return value
