"""The deployment's shared store: where state that must outlive a host lives when runs move
between hosts (a pod per run, workers on several machines, receivers behind one address).

`SYNC_STORE`:

- unset: each kind of state is a file of this host (the push journal and the webhook inbox
  beside the lake, the push lease beside the lake, the key budgets per host);
- `postgresql://user@host/db`: all of them in that database, so runs, pods and receivers are
  interchangeable (a Dagster deployment's own Postgres serves). A password is best left to
  `PGPASSWORD` or `~/.pgpass`; one in the URL is never shown.

A setting of one kind of state (`PUSH_JOURNAL`, `WEBHOOK_INBOX`, `SYNC_BUDGET_STORE`) wins over
this one for that kind. Nothing here knows of Dagster; psycopg is imported only where the store
is Postgres.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pipelines import errors
from pipelines.errors import SetupError, SyncError, Unavailable

STORE_VARIABLE = "SYNC_STORE"
POSTGRES_SCHEMES = ("postgresql", "postgres")


class StoreUnavailable(Unavailable):
    """A store of state cannot be opened or written: said with its location (a password
    taken out), the setting that names it, and what to do. The environment's fault (the
    server down, a full disk), or a location that cannot work, which only its message can
    tell apart; a URL that is not Postgres's is a `SetupError` (`store_url`)."""


def is_postgres(location: str) -> bool:
    return urlsplit(location).scheme in POSTGRES_SCHEMES


def store_url(env: Mapping[str, str] | None = None) -> str | None:
    """`SYNC_STORE`, or None where state stays on this host."""
    env = os.environ if env is None else env
    chosen = env.get(STORE_VARIABLE, "").strip()
    if not chosen:
        return None
    if not is_postgres(chosen):
        raise SetupError(
            f"{STORE_VARIABLE} must be a postgresql:// URL (the deployment's Postgres), or "
            "unset to keep state in files of this host"
        )
    return chosen


def shown(location: str) -> str:
    """A location fit for a message: a URL's password replaced by `***`."""
    parts = urlsplit(location)
    if not is_postgres(location) or parts.password is None:
        return location
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def first_line(exc: BaseException, location: str) -> str:
    """An error's first line, the location's password taken out."""
    cause = errors.first_line(exc)
    password = urlsplit(location).password if "://" in location else None
    return cause.replace(password, "***") if password else cause


def unavailable(
    what: str,
    location: str,
    variable: str,
    exc: BaseException,
    advice: str = "",
    error: type[SyncError] = StoreUnavailable,
) -> SyncError:
    """`what` (e.g. "the push journal") at `location` cannot be used, and what to do."""
    advice = advice or (
        f"Check {variable} and that this machine can reach and write it (free space, "
        "permissions, the server running)."
    )
    return error(
        f"{what} at {shown(location)} ({variable}) cannot be used: "
        f"{first_line(exc, location)}. {advice}"
    )


class Postgres:
    """One connection per process (never used across a fork), autocommit, opened again once
    where the server dropped it. `setup` runs once per connection, serialised across
    processes by an advisory lock, so two processes creating the same tables do not race.
    Any failure is a `StoreUnavailable` naming `what` and `variable`."""

    #: Any number, the same in every process: serialises the creation of tables.
    _SETUP_LOCK = 0x5B0D6E7

    def __init__(
        self,
        url: str,
        what: str,
        variable: str,
        setup: tuple[str, ...] = (),
        advice: str = "",
        error: type[StoreUnavailable] = StoreUnavailable,
    ) -> None:
        self.location = url
        self.what = what
        self.variable = variable
        self.advice = advice
        self.error = error
        self._setup = setup
        self._lock = threading.RLock()
        self._pid = -1
        self._db: Any = None
        self._connection()  # a wrong URL fails here, when the store opens

    def _failure(self, exc: BaseException) -> StoreUnavailable:
        return unavailable(self.what, self.location, self.variable, exc, self.advice, self.error)

    def _connection(self) -> Any:
        if self._db is None or self._db.closed or self._pid != os.getpid():
            import psycopg  # only where the store is Postgres

            try:
                db = psycopg.connect(self.location, autocommit=True, connect_timeout=10)
                with db.transaction():
                    db.execute("SELECT pg_advisory_xact_lock(%s)", (self._SETUP_LOCK,))
                    for statement in self._setup:
                        db.execute(statement)
            except psycopg.Error as exc:
                raise self._failure(exc) from None
            self._db, self._pid = db, os.getpid()
        return self._db

    def run(self, statement: str, values: Mapping[str, Any] | None = None) -> list[tuple]:
        """One statement in its own transaction; its rows (none for a statement without).
        A connection the server dropped is opened again and the statement sent again, once:
        every statement given here must be one that can run twice."""
        import psycopg

        with self._lock:
            for attempt in (1, 2):
                try:
                    cursor = self._connection().execute(statement, values)
                    return cursor.fetchall() if cursor.description else []
                except psycopg.OperationalError as exc:
                    self._db = None
                    if attempt == 2:
                        raise self._failure(exc) from None
                except psycopg.Error as exc:
                    raise self._failure(exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A transaction on this process's connection, held by one thread at a time."""
        import psycopg

        with self._lock:
            try:
                db = self._connection()
                with db.transaction():
                    yield db
            except psycopg.Error as exc:
                if isinstance(exc, psycopg.OperationalError):
                    self._db = None
                raise self._failure(exc) from None

    def close(self) -> None:
        with self._lock:
            if self._db is not None and self._pid == os.getpid():
                self._db.close()
            self._db = None
