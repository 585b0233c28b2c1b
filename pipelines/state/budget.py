"""A key's request budget, shared by every process that uses the key, on one host or many.

The pacer (`pipelines/transport/`) spaces a key's requests evenly under its documented
rate. Within one process that takes a lock and a number; across processes the number lives
in a store they share: per key and bucket of operations, the moment the next request may
start. A request reserves the next free slot in one atomic statement
(`next = max(next, now) + interval`) and sleeps until its own; a 429's `Retry-After` pushes
the moment past the hold, so every process waits it out. One statement per paced request,
no polling: a waiting process costs the store nothing while it sleeps.

Moments are read from a clock every process sharing the store reads alike: on one host the
system's monotonic clock (one per host, and not moved when someone or something sets the
wall clock), across hosts the Postgres server's. A stored moment further ahead than
`HORIZON_SECONDS` cannot have been a slot or a hold of that clock (a reboot restarted it):
it is taken as now, never slept on.

The store (`SYNC_BUDGET_STORE`, else the deployment's `SYNC_STORE`,
`pipelines/state/shared_store.py`):

- unset: `budget.sqlite3` in this host's state folder (`pipelines/state/local_data.py`), so every
  process of the host that uses a key shares its budget, whatever its lake;
- a file path: that SQLite file (every process of the host that uses a key must name the
  same file; not on a network file system, whose locks SQLite cannot trust);
- `postgresql://user@host/db`: a table `warehouse_sync_budget` there (hosts that share keys;
  a Dagster deployment's own Postgres serves), timed by the server's clock, so the hosts'
  clocks need not agree; a password is best left to `PGPASSWORD` or `~/.pgpass`, and one in
  the URL is never shown;
- `off`: a budget per process, as before the store (each process paces alone).

Only `key_id` (a hash) is stored, never a key. Pacing off (`pace = false`) opens no store.
Nothing here knows of Dagster.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from pipelines.errors import SetupError
from pipelines.state.local_data import host_dir
from pipelines.state.shared_store import (
    STORE_VARIABLE as SHARED_VARIABLE,
)
from pipelines.state.shared_store import (
    Postgres,
    StoreUnavailable,
    is_postgres,
    store_url,
    unavailable,
)

STORE_VARIABLE = "SYNC_BUDGET_STORE"
#: `SYNC_BUDGET_STORE=off`: each process paces its keys alone.
OFF = "off"
TABLE = "warehouse_sync_budget"
#: No slot or hold lies further ahead than this (a `Retry-After` is capped at 120 s,
#: pipelines/transport/); a stored moment beyond it is another clock's.
HORIZON_SECONDS = 600.0


class BudgetUnavailable(StoreUnavailable):
    """The shared store cannot be opened or answered: said with the store's location, its
    password taken out, and what to do."""


class BudgetStore(Protocol):
    def reserve(self, key_id: str, bucket: str, interval: float) -> float:
        """Take the key's next free slot and move it `interval` on: seconds until ours."""

    def hold(self, key_id: str, bucket: str, seconds: float) -> None:
        """Nobody on the key starts a request before `seconds` from now."""


#: Which settings name the store, for messages.
VARIABLES = f"{STORE_VARIABLE}, else {SHARED_VARIABLE}"
ADVICE = (
    f"Check {STORE_VARIABLE} (a SQLite file path, a postgresql:// URL, or '{OFF}' to pace "
    "each process alone) and that this machine can reach it."
)


def _unavailable(location: str, exc: BaseException) -> StoreUnavailable:
    return unavailable(
        "the shared rate budget", location, VARIABLES, exc, ADVICE, BudgetUnavailable
    )


def budget_location(env: Mapping[str, str] | None = None) -> str:
    """`SYNC_BUDGET_STORE`, else `SYNC_STORE`, else `budget.sqlite3` in this host's state
    folder (`pipelines/state/local_data.py`): one budget per key and host, whatever the lake."""
    env = os.environ if env is None else env
    chosen = env.get(STORE_VARIABLE, "").strip()
    if chosen:
        return chosen
    return store_url(env) or str(host_dir(env) / "budget.sqlite3")


def check_location(location: str) -> str:
    """A location that can name a store; said what to fix otherwise (nothing is opened)."""
    if location == OFF:
        return location
    parts = urlsplit(location)
    if "://" in location and not is_postgres(location):
        raise SetupError(
            f"{STORE_VARIABLE} names a store of scheme {parts.scheme!r}: give a SQLite file "
            f"path, a postgresql:// URL, or '{OFF}'"
        )
    return location


class SQLiteBudget:
    """The budget in a SQLite file: one host, no server. One upsert per paced request, in
    WAL mode (a commit writes the log, no fsync: a lost slot after a power cut costs
    nothing); writers queue on SQLite's lock, each process's threads on ours."""

    _CREATE = (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (key_id TEXT NOT NULL, bucket TEXT NOT NULL, "
        "next_at REAL NOT NULL, PRIMARY KEY (key_id, bucket)) WITHOUT ROWID"
    )
    #: The stored moment, or now where it is beyond the horizon.
    _KEPT = "CASE WHEN next_at > :now + :horizon THEN :now ELSE next_at END"
    _RESERVE = (
        f"INSERT INTO {TABLE} (key_id, bucket, next_at) VALUES (:key, :bucket, :now + :step) "
        f"ON CONFLICT (key_id, bucket) DO UPDATE SET next_at = max({_KEPT}, :now) + :step "
        "RETURNING next_at"
    )
    _HOLD = (
        f"INSERT INTO {TABLE} (key_id, bucket, next_at) VALUES (:key, :bucket, :until) "
        f"ON CONFLICT (key_id, bucket) DO UPDATE SET next_at = max({_KEPT}, :until)"
    )

    def __init__(self, path: Path) -> None:
        self.location = str(path)
        self._lock = threading.Lock()
        self._pid = -1
        self._db: sqlite3.Connection | None = None
        self._connection()  # a wrong path fails here, when the transport opens

    def _connection(self) -> sqlite3.Connection:
        # A connection is never used across a fork: a child opens its own.
        if self._db is None or self._pid != os.getpid():
            try:
                Path(self.location).parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(
                    self.location, timeout=60, isolation_level=None, check_same_thread=False
                )
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute(self._CREATE)
            except (OSError, sqlite3.Error) as exc:
                raise _unavailable(self.location, exc) from None
            self._db, self._pid = db, os.getpid()
        return self._db

    def reserve(self, key_id: str, bucket: str, interval: float) -> float:
        with self._lock:
            values = {"key": key_id, "bucket": bucket, "step": interval}
            try:
                [(next_at,)] = self._connection().execute(
                    self._RESERVE, values | {"now": time.monotonic(), "horizon": HORIZON_SECONDS}
                )
            except sqlite3.Error as exc:
                raise _unavailable(self.location, exc) from None
        # From the clock after the statement: time spent queueing for the file's lock is not
        # slept again on top of it.
        return next_at - interval - time.monotonic()

    def hold(self, key_id: str, bucket: str, seconds: float) -> None:
        with self._lock:
            now = time.monotonic()
            values = {"key": key_id, "bucket": bucket, "until": now + seconds}
            try:
                self._connection().execute(
                    self._HOLD, values | {"now": now, "horizon": HORIZON_SECONDS}
                )
            except sqlite3.Error as exc:
                raise _unavailable(self.location, exc) from None


class PostgresBudget:
    """The budget in Postgres, for processes on several hosts. An unlogged table (its rows
    are moments a few seconds ahead, not worth a write-ahead log), one upsert per paced
    request, timed by `clock_timestamp()` on the server: the row's lock orders the
    processes, and the server's clock is the one they all read."""

    _CREATE = (
        f"CREATE UNLOGGED TABLE IF NOT EXISTS {TABLE} (key_id text NOT NULL, "
        "bucket text NOT NULL, next_at double precision NOT NULL, PRIMARY KEY (key_id, bucket))"
    )
    _NOW = "extract(epoch FROM clock_timestamp())::float8"
    #: The stored moment, or now where it is beyond the horizon (the server's clock set back).
    _KEPT = f"CASE WHEN b.next_at > {_NOW} + {HORIZON_SECONDS} THEN {_NOW} ELSE b.next_at END"
    _RESERVE = (
        f"INSERT INTO {TABLE} AS b (key_id, bucket, next_at) "
        f"VALUES (%(key)s, %(bucket)s, {_NOW} + %(step)s) "
        f"ON CONFLICT (key_id, bucket) DO UPDATE SET next_at = greatest({_KEPT}, {_NOW}) "
        f"+ %(step)s RETURNING b.next_at - %(step)s - {_NOW}"
    )
    _HOLD = (
        f"INSERT INTO {TABLE} AS b (key_id, bucket, next_at) "
        f"VALUES (%(key)s, %(bucket)s, {_NOW} + %(seconds)s) "
        f"ON CONFLICT (key_id, bucket) DO UPDATE "
        f"SET next_at = greatest({_KEPT}, {_NOW} + %(seconds)s)"
    )

    def __init__(self, url: str) -> None:
        self.location = url
        self._db = Postgres(
            url, "the shared rate budget", VARIABLES, (self._CREATE,), ADVICE, BudgetUnavailable
        )

    def reserve(self, key_id: str, bucket: str, interval: float) -> float:
        [(wait,)] = self._db.run(self._RESERVE, {"key": key_id, "bucket": bucket, "step": interval})
        return wait

    def hold(self, key_id: str, bucket: str, seconds: float) -> None:
        self._db.run(self._HOLD, {"key": key_id, "bucket": bucket, "seconds": seconds})


_stores: dict[tuple[str, int], BudgetStore] = {}
_stores_lock = threading.Lock()


def open_budget(location: str) -> BudgetStore | None:
    """The store at `location` (one per process and location), or None for `off`."""
    location = check_location(location)
    if location == OFF:
        return None
    with _stores_lock:
        store = _stores.get((location, os.getpid()))
        if store is None:
            if is_postgres(location):
                store = PostgresBudget(location)
            else:
                store = SQLiteBudget(Path(location))
            _stores[(location, os.getpid())] = store
        return store


def shared_budget(env: Mapping[str, str] | None = None) -> BudgetStore | None:
    """The store the environment names (`budget_location`)."""
    return open_budget(budget_location(env))
