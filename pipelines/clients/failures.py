"""A connection's failure, told for the person who can fix it, and kept to that connection.

Every landing takes a service's connections at once (`each_connection`); `isolated` wraps one
connection's turn, so a wrong key, a dead address or a failing service fails that connection
only: its reason is kept and the others land. `explain` turns what went wrong into a sentence
that names the service, the connection, the base URL and the setting involved, and says what
to do; the key itself is taken out of any text that might carry it."""

from __future__ import annotations

import logging
import os
import ssl
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx

from pipelines.clients.base import Connection, Service
from pipelines.errors import Retriable, SetupError, SyncError, Unavailable
from pipelines.lake.object_store import lake_fault
from pipelines.transport import ServiceError


def _redacted(text: str, connection: Connection, service: Service) -> str:
    try:
        key = connection.key(service.service)
    except SetupError:
        return text
    return text.replace(key, "[key]")


def explain(service: Service, connection: Connection, exc: BaseException) -> str:
    """What went wrong for one connection, and what to do about it."""
    where = f"{service.service} connection {connection.name!r} ({connection.base_url})"
    url_setting = connection.base_url_from or "its base_url"
    key_setting = connection.api_key_env or "its key"
    if isinstance(exc, SetupError | Unavailable):  # a setting, the lake's or a store's: theirs
        return str(exc)
    if isinstance(exc, ServiceError):
        if exc.status == 401:
            return (
                f"{where}: the key in {key_setting} was refused ({exc}). Check that "
                f"{key_setting} holds this connection's key, for this base URL."
            )
        if exc.status == 403:
            return (
                f"{where}: the key in {key_setting} may not do this ({exc}). Use a key whose "
                "scope or plan allows it, or leave this connection out."
            )
        if exc.status == 404:
            return (
                f"{where}: {exc}. If every call answers 404 the base URL is wrong: check "
                f"{url_setting} (it includes the API's version, e.g. ending in /v1 where the "
                "service's documentation shows one)."
            )
        if exc.status >= 500 or exc.status == 429:
            return (
                f"{where}: the service kept failing ({exc}) through every retry. Nothing to "
                "fix on this side; the next run tries again."
            )
        return _redacted(f"{where}: {exc}", connection, service)
    if isinstance(exc, httpx.ConnectError):
        cause = _redacted(str(exc), connection, service)
        if _untrusted_certificate(exc):
            return (
                f"{where}: the service's certificate is not trusted here ({cause}). Check "
                f"{url_setting}; if the certificate is signed by your organisation's own "
                "authority, name that authority's certificates in SSL_CERT_FILE (a file) or "
                "SSL_CERT_DIR (a folder)."
            )
        return (
            f"{where}: nothing answers at this address ({cause}). "
            f"Check {url_setting} and that the service can be reached from this machine."
        )
    if isinstance(exc, httpx.TimeoutException):
        return (
            f"{where}: no answer within {service.timeout_seconds:g} s, on every retry. The "
            f"service is slow or unreachable; check {url_setting}, or raise "
            f"timeout_seconds under [service.{service.service}] in sync.toml."
        )
    fault = lake_fault(exc, os.environ.get("LAKE_ROOT", "data/lake"))
    if fault is not None:  # the lake's, not the service's
        return f"{where}: pulled, but the lake could not take it: {fault}"
    if isinstance(exc, Retriable):
        return _redacted(f"{where}: {exc}; the next run tries again", connection, service)
    if isinstance(exc, SyncError):  # its message is complete (pipelines/errors.py)
        return _redacted(f"{where}: {exc}", connection, service)
    # Anything else is a fault of ours: the type says where to look.
    return _redacted(f"{where}: {type(exc).__name__}: {exc}", connection, service)


def _untrusted_certificate(exc: BaseException) -> bool:
    """Whether `exc` comes of a certificate that failed verification (httpx keeps the TLS
    error among its causes)."""
    while exc is not None:
        if isinstance(exc, ssl.SSLCertVerificationError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@contextmanager
def isolated(service: Service, connection: Connection, failed: dict[str, str]) -> Iterator[None]:
    """One connection's turn: an error ends it, is explained into `failed` (by connection
    name) and goes no further, so the next connection still lands."""
    try:
        yield
    except Exception as exc:  # any failure is this connection's, the others go on
        failed[connection.name] = explain(service, connection, exc)
        # The explanation is the user's; the trace is ours, at DEBUG (`--debug`), keyless.
        trace = "".join(traceback.format_exception(exc))
        logging.getLogger("pipelines").debug(_redacted(trace, connection, service))


def each_connection(
    service: Service, failed: dict[str, str], turn: Callable[[Connection], None]
) -> None:
    """`turn` for every connection of `service`, at once (a thread each, up to the service's
    `connections_at_once`), each `isolated`; returns when every turn is over. Each connection
    has its own key (so its own budget, `pipelines/state/budget.py`) and region, so one's requests,
    polls and downloads need not wait for another's. A turn records what it did in a place of
    its own connection's (its name as the key) or through thread-safe tallies (`CallStats`,
    `Drift`)."""

    def isolated_turn(connection: Connection) -> None:
        with isolated(service, connection, failed):
            turn(connection)

    connections = service.connections
    workers = min(len(connections), service.connections_at_once)
    if workers <= 1:  # no thread where none would run beside it
        for connection in connections:
            isolated_turn(connection)
        return
    with ThreadPoolExecutor(workers, thread_name_prefix=f"{service.service}-connection") as pool:
        for done in [pool.submit(isolated_turn, c) for c in connections]:
            done.result()
