"""One push at a time per lake, across processes and hosts: a lease.

Two pushes of one lake would each plan the rows the other is sending (neither reads the
other's live journal) and send them twice. So a push takes the lake's lease before it reads
the ledger and holds it until its last answer is journaled. The holder renews it from a
thread every third of `TTL_SECONDS`; a holder that died stops renewing and the lease is free
`TTL_SECONDS` (`PUSH_LEASE_SECONDS`) later, with nobody to release it by hand. A push that
finds it held waits, saying so, up to `PUSH_WAIT_SECONDS`, then ends with `PushBusy` naming
the holder.

Where the lease lives:

- `SYNC_STORE` set (`pipelines/state/shared_store.py`): a table of that Postgres, timed by the
  server's clock, so pushes on every host that share the lake exclude each other;
- else a file in `push/` beside the lake (`pipelines/state/local_data.py`), locked with `flock`
  by the processes of this host: a holder that dies frees it at once, with no lapse.

A holder that cannot renew (the store went away) counts its lease as lost once `TTL_SECONDS`
have passed since its last renewal, when another push may hold it: its sends stop. A holder
that was paused past its lease (a VM paused, a long garbage collection) may have checked it
just before: in Postgres, each journal write is made only while the lease is still its own by
the server's clock (`Lease.fence`), in the same statement, so a send it journals before the
request goes is sent only if journaled under the lease.

What a push finds marked `sending` without an answer was sent by a push that was killed, or
that stalled and may still send it when it resumes. `Lease.alone` tells them apart: on one
host, the lock is free only once every earlier holder is dead; in Postgres each holder keeps
a shared advisory lock on its session while it lives (stopped or not: the server keeps a
stopped process's session), and a new holder that can take that lock exclusively, for a
moment, knows no earlier push of the lake is alive. The server ends a killed process's
session at once; a host that vanished keeps its session until the server's TCP keepalive
ends it, and until then its marks count as another's that may still be sent.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from pipelines.errors import Busy, SetupError, Unavailable
from pipelines.state.local_data import data_dir
from pipelines.state.shared_store import (
    STORE_VARIABLE,
    Postgres,
    StoreUnavailable,
    store_url,
    unavailable,
)

WAIT_VARIABLE = "PUSH_WAIT_SECONDS"
#: How long a push waits for another to end, unless `PUSH_WAIT_SECONDS` says.
WAIT_SECONDS = 600.0
TTL_VARIABLE = "PUSH_LEASE_SECONDS"
#: A lease not renewed for this long is free, unless `PUSH_LEASE_SECONDS` says: a holder
#: that died releases it this late; a holder that cannot reach the store for this long stops.
TTL_SECONDS = 30.0
#: How often a waiting push asks again.
POLL_SECONDS = 1.0
TABLE = "warehouse_sync_push_lease"


class PushBusy(Busy):
    """Another push held the lake's lease for the whole wait (`python -m cli push`
    exits with `Busy`'s code)."""


class LeaseLost(Unavailable):
    """This push's lease lapsed (it could not be renewed): another push may hold it now."""


def _statements(now: str, p: Callable[[str], str]) -> dict[str, str]:
    """The lease's statements for a dialect: `now` its clock in seconds, `p` a parameter."""
    kept = f"(t.expires_at >= {now} AND t.expires_at <= {now} + {p('ttl')})"
    return {
        "take": (
            f"INSERT INTO {TABLE} AS t (scope, holder, token, expires_at) "
            f"VALUES ({p('scope')}, {p('holder')}, {p('token')}, {now} + {p('ttl')}) "
            "ON CONFLICT (scope) DO UPDATE SET holder = excluded.holder, "
            "token = excluded.token, expires_at = excluded.expires_at "
            f"WHERE t.token = excluded.token OR NOT {kept} RETURNING token"
        ),
        "renew": (
            f"UPDATE {TABLE} SET expires_at = {now} + {p('ttl')} "
            f"WHERE scope = {p('scope')} AND token = {p('token')} RETURNING token"
        ),
        "release": f"DELETE FROM {TABLE} WHERE scope = {p('scope')} AND token = {p('token')}",
        "holder": f"SELECT holder FROM {TABLE} WHERE scope = {p('scope')}",
    }


#: The session advisory lock a live push of `%(scope)s` holds shared (`PostgresLeases`).
_ALIVE_KEY = "hashtextextended('warehouse_sync_push_alive:' || %(scope)s, 0)"


class FileLeases:
    """The leases of this host: an exclusive `flock` on a file beside the lake, one per
    lake. The kernel releases it the moment its holder dies, so a push killed here frees
    its lake at once; the file holds the holder's name for a waiting push to print."""

    def __init__(self, folder: Path) -> None:
        self.location = str(folder)
        self._folder = folder
        self._fd: int | None = None

    def _path(self, scope: str) -> Path:
        return self._folder / f"lease-{hashlib.sha256(scope.encode()).hexdigest()[:16]}"

    def run(self, statement: str, values: dict) -> list[tuple]:
        path = self._path(values["scope"])
        try:
            if statement == "take":
                return self._take(path, values["holder"], values["token"])
            if statement == "renew":  # held while this process lives
                return [(values["token"],)] if self._fd is not None else []
            if statement == "release":
                self.close()
                return []
            if statement in ("alive", "ended"):  # the lock held is the sign of life
                return []
            if statement == "alone":
                # A push of this host takes the lock only once every earlier holder died,
                # and a dry run predicts the push that waits for it.
                return [(True,)]
            held_by = path.read_text().strip() if path.exists() else ""
            return [(held_by,)] if held_by else []
        except OSError as exc:
            raise unavailable("the push lease", str(path), "LAKE_ROOT", exc) from None

    def _take(self, path: Path, holder: str, token: str) -> list[tuple]:
        if self._fd is not None:
            return [(token,)]
        self._folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return []
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        self._fd = fd
        return [(token,)]

    def close(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # releases the lock
            self._fd = None


#: The server's clock, in seconds: what a lease in Postgres is timed by.
SERVER_NOW = "extract(epoch FROM clock_timestamp())::float8"


class PostgresLeases:
    """Leases in the deployment's Postgres, timed by the server's clock."""

    _CREATE = (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (scope text PRIMARY KEY, holder text NOT NULL, "
        "token text NOT NULL, expires_at double precision NOT NULL)"
    )
    _SQL = _statements(SERVER_NOW, lambda name: f"%({name})s") | {
        # Held by this session while it lives; taken again with each renewal, in case the
        # connection was opened again (the locks stack, and all end with the session).
        "alive": f"SELECT pg_advisory_lock_shared({_ALIVE_KEY})",
        # Let go at the end, not left to the session's end, which the server does later.
        "ended": "SELECT pg_advisory_unlock_all()",
        # No other session holds it: every earlier push of the lake has ended.
        "alone": (
            f"SELECT CASE WHEN pg_try_advisory_lock({_ALIVE_KEY}) "
            f"THEN pg_advisory_unlock({_ALIVE_KEY}) ELSE false END"
        ),
    }
    #: True while the lease of `%(scope)s` is `%(token)s`'s and has not lapsed by the
    #: server's clock: the condition a journal write in the same database is made under.
    HELD = (
        f"EXISTS (SELECT 1 FROM {TABLE} WHERE scope = %(scope)s AND token = %(token)s "
        f"AND expires_at > {SERVER_NOW})"
    )

    def __init__(self, url: str) -> None:
        self.location = url
        self._db = Postgres(url, "the push lease", STORE_VARIABLE, (self._CREATE,))

    def run(self, statement: str, values: dict) -> list[tuple]:
        return self._db.run(self._SQL[statement], values)

    def close(self) -> None:
        self._db.close()


def seconds_setting(
    variable: str, default: float, what: str, env: Mapping[str, str] | None = None
) -> float:
    """A setting in seconds (0 or more), or `default` where it is unset."""
    env = os.environ if env is None else env
    text = env.get(variable, "").strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise SetupError(f"{variable}={text!r}: give {what}, in seconds")
    return seconds


def wait_seconds(env: Mapping[str, str] | None = None) -> float:
    return seconds_setting(WAIT_VARIABLE, WAIT_SECONDS, "how long a push waits for another", env)


def lease_seconds(env: Mapping[str, str] | None = None) -> float:
    return seconds_setting(TTL_VARIABLE, TTL_SECONDS, "how long a lease outlives its holder", env)


def scope_of(lake_root: str) -> str:
    """The lake the lease is for: a local lake by its absolute path."""
    return lake_root if "://" in lake_root else str(Path(lake_root).resolve())


def open_leases(lake_root: str, env: Mapping[str, str] | None = None):
    url = store_url(env)
    if url is not None:
        return PostgresLeases(url)
    return FileLeases(data_dir(lake_root, env) / "push")


class Lease:
    """The lake's push lease, held from `acquire` to `release` (or the end of a `with`)."""

    def __init__(
        self,
        lake_root: str,
        holder: str,
        env: Mapping[str, str] | None = None,
        ttl: float | None = None,
    ) -> None:
        self.scope = scope_of(lake_root)
        self.holder = holder
        self.ttl = lease_seconds(env) if ttl is None else ttl
        self._store = open_leases(lake_root, env)
        self._values = {"scope": self.scope, "token": uuid.uuid4().hex, "ttl": self.ttl}
        self._renewed = 0.0
        #: Set by `acquire`: no earlier push of the lake is alive (`alone`).
        self.alone = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, wait: float, log: Callable[[str], None] = print) -> None:
        """Take the lease, waiting up to `wait` seconds for its holder to end."""
        deadline = time.monotonic() + wait
        told = None
        while True:
            started = time.monotonic()
            if self._store.run("take", self._values | {"holder": self.holder}):
                break
            other = self._store.run("holder", self._values)
            held_by = other[0][0] if other else "a push starting or ending"
            if time.monotonic() >= deadline:
                raise PushBusy(
                    f"another push holds the lake {self.scope}: {held_by}. Waited {wait:.0f} s "
                    f"({WAIT_VARIABLE}); run again once it ends (a push that died frees the "
                    f"lake {self.ttl:.0f} s after its last sign of life)."
                )
            if held_by != told:
                log(
                    f"waiting for another push of this lake to end (up to {wait:.0f} s, "
                    f"{WAIT_VARIABLE}): {held_by}"
                )
                told = held_by
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        self._renewed = started
        self.alone = bool(self._store.run("alone", self._values)[0][0])
        self._store.run("alive", self._values)
        self._thread = threading.Thread(target=self._keep, name="push-lease", daemon=True)
        self._thread.start()

    def _keep(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            started = time.monotonic()
            try:
                renewed = self._store.run("renew", self._values)
            except StoreUnavailable:
                continue  # counted as lost once the ttl has passed: `held`
            if not renewed:
                self._renewed = -self.ttl  # another took it: lost at once
                return
            self._renewed = started
            with contextlib.suppress(StoreUnavailable):
                self._store.run("alive", self._values)

    @property
    def fence(self) -> dict[str, str] | None:
        """What a journal write in the lease's Postgres checks in the same statement
        (`PostgresLeases.HELD`, `pipelines/push/shared_journal.py`). None for this host's
        file lease: the kernel keeps its lock while the holder lives, paused or not, so no
        other push of this host can take the lake meanwhile."""
        if isinstance(self._store, PostgresLeases):
            return {"scope": self.scope, "token": self._values["token"]}
        return None

    def lapsed(self) -> LeaseLost:
        """The error of a journal write refused because the lease was no longer this push's
        by the store's clock (the process paused past it, or could not renew it)."""
        return LeaseLost(
            f"this push lost the lake's lease ({self.scope}): by {STORE_VARIABLE}'s clock it "
            f"lapsed (not renewed for {self.ttl:.0f} s: the process paused, or the store was "
            "out of reach), so another push may be sending. Nothing more is sent; what this "
            "push had sent without its answer journaled is in doubt for the next one "
            "(sync.rejected). Run again."
        )

    def held(self) -> bool:
        """Still ours: renewed within the last `ttl` seconds."""
        return self._thread is not None and time.monotonic() - self._renewed < self.ttl

    def check(self) -> None:
        """Raise `LeaseLost` unless the lease is still ours."""
        if not self.held():
            raise LeaseLost(
                f"this push lost the lake's lease ({self.scope}): it could not be renewed for "
                f"{self.ttl:.0f} s, so another push may be sending. Nothing more is sent; "
                f"check that {STORE_VARIABLE} (or the lake's folder) can be reached, and run "
                "again."
            )

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            with contextlib.suppress(StoreUnavailable):  # it lapses by itself after the ttl
                self._store.run("ended", self._values)
                self._store.run("release", self._values)
        self._store.close()


def no_push_alive(lake_root: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether no push of the lake is alive, asked without taking its lease (a dry run's
    prediction of `Lease.alone`)."""
    store = open_leases(lake_root, env)
    try:
        return bool(store.run("alone", {"scope": scope_of(lake_root)})[0][0])
    finally:
        store.close()


def holder_name(run_id: str | None = None) -> str:
    """Who holds a lease, for the message a waiting push prints."""
    since = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    run = f"run {run_id} " if run_id else ""
    return f"push {run}on {socket.gethostname()} (pid {os.getpid()}) since {since}"
