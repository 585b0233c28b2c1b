"""`python -m cli check`: is the setup right? One cheap authenticated call per
connection (the cheapest read each service documents), the lake written to and looked over
(damaged files set aside, files it did not write), the shared store reached, the webhook
receiver's secret and the AI agent's settings present and the alerts' destinations
(`ALERT_URLS`: off where unset) well formed, each with ok or the reason and what to do
(`pipelines/clients/failures.py`, `pipelines/lake/object_store.py`)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

import pyarrow.fs as pafs

from pipelines import alerts
from pipelines.agent.receiver import AGENT_PATH, TOKEN_VARIABLE
from pipelines.agent.reply import REPLY_VARIABLE, deadline_of, load_function
from pipelines.clients.base import Service
from pipelines.clients.comment import CommentClient
from pipelines.clients.failures import isolated
from pipelines.errors import SetupError, SyncError
from pipelines.lake import Lake, footers, watermarks
from pipelines.lake.object_store import lake_fault
from pipelines.pull.damaged import FOLDER, FOREIGN, REASON_SUFFIX
from pipelines.registry import LAKE_STREAMS
from pipelines.state.shared_store import STORE_VARIABLE, Postgres, first_line, shown, store_url
from pipelines.transport import CallStats, Transport
from pipelines.warehouse import SQL_DIR, others_streams
from pipelines.webhooks.receiver import SECRET_VARIABLE

#: The call each service's check makes, by service.
PROBES: dict[str, Callable[[Service, Transport], object]] = {
    "comment": lambda service, transport: CommentClient(transport).me(),
    "conversation": lambda service, transport: service.client(transport).list_channels(),
    "datahub": lambda service, transport: service.client(transport).list_custom_fields(),
}
#: The name of the small file the lake's check writes and removes, before its host and pid.
PROBE = ".check-"
#: A probe this old was left by a check that was killed: a live check's lives for one write.
STALE_PROBE = timedelta(minutes=1)
#: The lake's own folders at its root, beside the services'.
LAKE_FOLDERS = (FOLDER, FOREIGN, footers.FOLDER, watermarks.FOLDER)
#: The most paths of files the lake did not write that the check names; it counts the rest.
#: A folder counts once, whatever it holds.
NAMED = 50


@dataclass(frozen=True)
class Checked:
    service: str
    connection: str
    url: str
    problem: str = ""
    #: Something to know that stops nothing here.
    warning: str = ""
    #: The check's exit code where this row failed (`cli/main.py`): its error's, else 1.
    exit_code: int = 1

    @property
    def ok(self) -> bool:
        return not self.problem

    @property
    def result(self) -> str:
        """`ok`, `WARN` or `FAILED`, as the check's table shows it."""
        return "FAILED" if self.problem else "WARN" if self.warning else "ok"


def check_everything(
    services: dict[str, Service], lake_root: str, warehouse_sql: Sequence[str | Path] = ()
) -> list[Checked]:
    """Every row of the check, in the order it is shown: the connections, then the lake,
    the shared store, the webhook secret, the agent and the alerts. `warehouse_sql`: the
    folders `WAREHOUSE_SQL` lists, whose sources the lake holds for others."""
    return [
        *check_connections(services),
        check_lake(lake_root, warehouse_sql),
        check_shared_store(),
        check_webhook_secret(),
        check_agent(),
        check_alerts(),
    ]


def check_connections(services: dict[str, Service]) -> list[Checked]:
    """Every connection of every service, each checked on its own, with one retry at most:
    a check should answer in seconds."""
    checked = []
    for name, service in services.items():
        quick = service.model_copy(update={"retry_attempts": 2, "timeout_seconds": 10.0})
        for connection in service.connections:
            failed: dict[str, str] = {}
            with (
                isolated(service, connection, failed),
                quick.transport(connection, CallStats()) as transport,
            ):
                PROBES[name](quick, transport)
            checked.append(
                Checked(name, connection.name, connection.base_url, failed.get(connection.name, ""))
            )
    return checked


def check_webhook_secret() -> Checked:
    """A warning, not a failure, where the secret is missing: only the receiver needs it,
    and it refuses to start without it (`pipelines/webhooks/__main__.py`), so a host that
    pulls and pushes is right without it."""
    present = bool(os.environ.get(SECRET_VARIABLE, "").strip())
    warning = (
        ""
        if present
        else (
            f"{SECRET_VARIABLE} is not set: the webhook receiver needs the data hub's signing "
            "secret; set it where the receiver runs (pulls and pushes do not need it)"
        )
    )
    return Checked("datahub", "webhooks", f"${SECRET_VARIABLE}", warning=warning)


def check_agent() -> Checked:
    """The AI agent's endpoint and what answers there: `AGENT_TOKEN` missing is a warning (only
    the agent's receiver needs it, and it refuses to start without it); a reply function
    that cannot be loaded or a wrong deadline is a failure, as the receiver would fail."""
    function = os.environ.get(REPLY_VARIABLE, "")
    try:
        if function:
            load_function(function)
        seconds = deadline_of(os.environ)
    except SetupError as problem:
        return Checked(
            "conversation", "agent", AGENT_PATH, str(problem), exit_code=problem.exit_code
        )
    answered = f"{REPLY_VARIABLE}={function}" if function else "the default reply (handover)"
    where = f"{AGENT_PATH}: {answered} within {seconds:g} s"
    if os.environ.get(TOKEN_VARIABLE, "").strip():
        return Checked("conversation", "agent", where)
    warning = (
        f"{TOKEN_VARIABLE} is not set: the agent's receiver needs the token the conversation "
        "service sends; set it where `python -m pipelines.agent` runs (pulls and pushes do "
        "not need it)"
    )
    return Checked("conversation", "agent", where, warning=warning)


def check_alerts() -> Checked:
    """Where alerts go: the kinds of destination (never a URL: they hold tokens), "unset:
    alerting off" without `ALERT_URLS`, or what is wrong with it. Nothing is sent."""
    try:
        settings = alerts.alert_settings()
    except SetupError as problem:
        return Checked(
            "alerts", alerts.URLS_VARIABLE, "not shown", str(problem), exit_code=problem.exit_code
        )
    return Checked("alerts", alerts.URLS_VARIABLE, settings.describe())


def check_lake(root: str, warehouse_sql: Sequence[str | Path] = ()) -> Checked:
    """The lake: its store answers, a small file can be written there and removed (a full
    disk, a store that refuses writes, a key that may only read fail here), and, as
    warnings, the damaged files set aside (`pipelines/pull/damaged.py`) and what the lake
    holds that it did not write, moved aside or left where it is. One listing of the whole
    lake. A probe a killed check left behind is removed."""
    try:
        lake = Lake(root)
        lake.verify()
        probe = f"{lake.root}/{PROBE}{socket.gethostname()}-{os.getpid()}"
        lake.fs.create_dir(lake.root, recursive=True)
        with lake.fs.open_output_stream(probe) as out:
            out.write(b"\0" * 4096)
        lake.fs.delete_file(probe)
        remove_stale_probes(lake)
        selector = pafs.FileSelector(lake.root, allow_not_found=True, recursive=True)
        listed = lake.fs.get_file_info(selector)
    except SyncError as problem:  # a setting (WrongLakeRoot) or the store out of reach
        return Checked("lake", "LAKE_ROOT", root, str(problem), exit_code=problem.exit_code)
    except OSError as error:
        fault = lake_fault(error, root)
        problem = str(fault) if fault else f"LAKE_ROOT={root}: {first_line(error, root)}"
        return Checked("lake", "LAKE_ROOT", root, problem)
    warnings = []
    damaged = set_aside_in(lake, listed, FOLDER)
    if damaged:
        warnings.append(
            f"{len(damaged)} damaged file(s) set aside in {lake.uri(f'{lake.root}/{FOLDER}')}; "
            f"their days landed again. Look at each and its {REASON_SUFFIX}, then delete them"
        )
    moved = set_aside_in(lake, listed, FOREIGN)
    if moved:
        warnings.append(
            f"{len(moved)} file(s) the lake did not write, which a view would have read, set "
            f"aside in {lake.uri(f'{lake.root}/{FOREIGN}')}: {named(moved)}. Look at each and "
            f"its {REASON_SUFFIX}, then delete them"
        )
    streams = [*LAKE_STREAMS, *others_streams([SQL_DIR, *map(Path, warehouse_sql)], LAKE_STREAMS)]
    others = [
        path
        for path in lake.unrecognised(listed, streams, LAKE_FOLDERS)
        if not PurePosixPath(path).name.startswith(PROBE)  # a check beside this one
    ]
    if others:
        warnings.append(
            f"{len(others)} file(s) or folder(s) the lake did not write, which no sync or view "
            f"reads: {named(others)}. Move or delete them if nothing else needs them"
        )
    return Checked("lake", "LAKE_ROOT", root, warning=". ".join(warnings))


def set_aside_in(lake: Lake, listed: list[pafs.FileInfo], folder: str) -> list[str]:
    """The files set aside in one of the lake's folders (`_damaged`, `_foreign`), by their
    names there; not their reasons."""
    inside = f"{lake.root}/{folder}/"
    return [
        lake.uri(info.path)
        for info in listed
        if info.is_file and info.path.startswith(inside) and not info.path.endswith(REASON_SUFFIX)
    ]


def named(paths: list[str]) -> str:
    """Paths for a line: the first `NAMED`, then how many more."""
    more = f" and {len(paths) - NAMED} more" if len(paths) > NAMED else ""
    return ", ".join(paths[:NAMED]) + more


def remove_stale_probes(lake: Lake) -> None:
    """Remove the probes of checks killed between writing and removing theirs."""
    now = datetime.now(UTC)
    for info in lake.fs.get_file_info(pafs.FileSelector(lake.root, allow_not_found=True)):
        stale = info.is_file and info.mtime is not None and now - info.mtime > STALE_PROBE
        if stale and info.base_name.startswith(PROBE):
            with suppress(FileNotFoundError):  # another check removed it first
                lake.fs.delete_file(info.path)


def check_shared_store() -> Checked:
    """The deployment's shared store answers, where `SYNC_STORE` names one."""
    try:
        url = store_url()
        if url is None:
            return Checked("store", STORE_VARIABLE, "unset: state in files of this host")
        Postgres(url, "the shared store", STORE_VARIABLE).run("SELECT 1")
    except SyncError as problem:  # a URL that is not Postgres's, or the server out of reach
        where = shown(os.environ[STORE_VARIABLE])
        return Checked("store", STORE_VARIABLE, where, str(problem), exit_code=problem.exit_code)
    return Checked("store", STORE_VARIABLE, shown(url))
