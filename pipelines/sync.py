"""`python -m cli sync` as cron runs it: every stream a selection names landed through
the core's one run of a stream (`pipelines/stream_run.py`) in this process, with no Dagster,
the receivers' inboxes compacted into the lake, and the warehouse's views brought up to date
once, at the end. Where DAGSTER_HOME keeps an instance the command line runs the same sync
with its runs as Dagster runs (`Runner`; `assets/sync.py`): this module alone decides which
streams, in which order, for which days, and how a failure is told.

Without a range, each daily stream lands the days of the one day policy (`days_to_sync`):
what is missing from the days its service still serves, plus yesterday and today (what can
still change): on an empty lake that is everything; on a synced one, two days. With one (a
backfill), the days beyond its edges are compared with the service after it (`mended_edges`).
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

from pipelines.agent.compaction import AGENT_COMPACTION
from pipelines.errors import SetupError, SyncError
from pipelines.inbox.compaction import InboxCompaction
from pipelines.lake import Lake
from pipelines.lake.object_store import lake_fault
from pipelines.mistakes import misnamed
from pipelines.pull.damaged import set_aside_damaged
from pipelines.pull.edges import mend_edges
from pipelines.pull.landing import PulledStream, today
from pipelines.registry import PULLED
from pipelines.settings import Settings, lake_location, load_settings, services
from pipelines.stream import Stream
from pipelines.stream_run import (
    days_to_sync,
    first_sync_day,
    run_stream,
    service_window,
    written_by,
)
from pipelines.warehouse import WarehouseBusy, WarehouseUnavailable, Written
from pipelines.warehouse.relations import refresh_warehouse, warehouse_of
from pipelines.webhooks.compaction import WEBHOOK_COMPACTION

#: What `sync.runs` says started a run of the command line.
COMMAND_LINE = "command line"


@dataclass
class SyncReport:
    succeeded: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    #: Each failure's exit code, by the same key as `failed`.
    codes: dict[str, int] = field(default_factory=dict)
    ranges: dict[str, tuple[date, date]] = field(default_factory=dict)
    warehouse: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def exit_code(self) -> int:
        """0, or the highest exit code of its failures (docs/running.md): a damaged file
        (4) over another run busy (3) over a setting (2) over the rest (1)."""
        return max(self.codes.values(), default=0)

    def fail(self, what: str, message: str, code: int) -> None:
        self.failed[what] = message
        self.codes[what] = code


#: The receivers' relations: the data hub's webhooks, the AI agent's turns.
RECEIVERS = [WEBHOOK_COMPACTION, AGENT_COMPACTION]


def _names(stream: Stream) -> set[str]:
    """What `--streams` knows a stream by: its service, its name, its relation."""
    return {stream.service, stream.name, stream.relation}


def selectable() -> list[Stream]:
    """Every stream a sync lands: the pulled ones, then the receivers'."""
    return [*PULLED, *(stream for receiver in RECEIVERS for stream in receiver.streams)]


def unknown_names(names: list[str]) -> str | None:
    """What is wrong with the names `--streams` was given; None when each names a service,
    a stream or a relation."""
    unknown = misnamed(names, sorted({name for stream in selectable() for name in _names(stream)}))
    if not unknown:
        return None
    return f"--streams: no stream is named {unknown}"


def select_streams(names: list[str] | None) -> tuple[list[PulledStream], list[InboxCompaction]]:
    """The pulled streams and the receivers `names` select: a service (`comment`, every one
    of its relations), a stream (`trigger_logs`) or a relation (`comment.trigger_logs`);
    none means everything. A name that selects nothing is a `SetupError` (`unknown_names`)."""
    if not names:
        return list(PULLED), list(RECEIVERS)
    problem = unknown_names(names)
    if problem:
        raise SetupError(f"{problem}; `python -m cli sync --help` lists them")
    wanted = set(names)
    pulled = [s for s in PULLED if _names(s) & wanted]
    received = [r for r in RECEIVERS if any(_names(s) & wanted for s in r.streams)]
    return pulled, received


def run_order(streams: list[PulledStream]) -> list[list[PulledStream]]:
    """The sync's runs, in an order where each stream comes after the streams it reads
    (`PulledStream.upstream`: broadcast reports after broadcasts, conversation members after
    the messages they are seen in), declaration order otherwise. A daily stream is a run of
    its own (it has its own range of days); snapshots of one service that follow each other
    share one."""
    left, ordered = list(streams), []
    while left:
        waiting = {(s.service, s.name) for s in left}
        ready = next(s for s in left if not {(s.service, name) for name in s.upstream} & waiting)
        left.remove(ready)
        ordered.append(ready)
    runs: list[list[PulledStream]] = []
    for stream in ordered:
        previous = runs[-1][-1] if runs else None
        joins = (
            previous is not None
            and previous.service == stream.service
            and not previous.partitioned
            and not stream.partitioned
        )
        if joins:
            runs[-1].append(stream)
        else:
            runs.append([stream])
    return runs


@dataclass(frozen=True)
class Plan:
    """What a sync lands: its runs of pulled streams (`run_order`), its receivers, and the
    days asked for (`--start`, `--end`, either None)."""

    runs: list[list[PulledStream]]
    received: list[InboxCompaction]
    settings: Settings
    lake: Lake
    asked: tuple[date | None, date | None]


def plan_sync(
    streams: list[str] | None, start: date | None, end: date | None, settings: Settings
) -> Plan:
    """The sync of what `streams` selects (`select_streams`), in its order, the leftovers of
    a killed run swept from the lake first. A view that cannot be built whatever lands (a
    `WAREHOUSE_SQL` source no one wrote) is a `SetupError` before any request."""
    pulled, received = select_streams(streams)
    warehouse_of(
        settings.lake_root, settings.warehouse_path, settings.warehouse_sql
    ).check_sources()
    lake = Lake(settings.lake_root)
    lake.sweep_temporary()
    runs = run_order([s for s in pulled if settings.connections[s.service]])
    return Plan(runs, received, settings, lake, (start, end))


class Runner(Protocol):
    """How a sync's runs execute: here, with no Dagster (`InProcess`), or as Dagster runs of
    the same assets the UI runs (`assets/sync.py`). The sync itself (`land`) is the same."""

    def land(self, run: list[PulledStream], days: list[date] | None, report: SyncReport) -> None:
        """Land one run of the plan (`run_order`) over `days` (None: not partitioned),
        noting in `report` what succeeded and what failed."""

    def compact(self, receiver: InboxCompaction, report: SyncReport) -> set[Written]:
        """Land what a receiver stored, noted in `report`; returns what it wrote."""


@dataclass
class InProcess:
    """The runs in this process through the core's one run of a stream (`run_stream`)."""

    plan: Plan
    console: logging.Logger

    def land(self, run: list[PulledStream], days: list[date] | None, report: SyncReport) -> None:
        settings = self.plan.settings
        for stream in run:
            try:
                landed = run_stream(
                    stream,
                    services(settings)[stream.service],
                    lake_location(settings),
                    days,
                    run_id=str(uuid.uuid4()),
                    started_by=COMMAND_LINE,
                    log=self.console.info,
                    warn=self.console.warning,
                    build_views=False,
                )
            except Exception as error:
                report.fail(stream.relation, *told_error(error, settings))
            else:
                if landed.landed.failed:
                    report.fail(stream.relation, landed.failure(), 1)
                else:
                    report.succeeded.append(stream.relation)

    def compact(self, receiver: InboxCompaction, report: SyncReport) -> set[Written]:
        root = lake_location(self.plan.settings).lake_root
        done = receiver.compact(root, self.plan.lake, self.console.info, self.console.warning)
        report.succeeded.append(receiver.label)
        return done.written()


@contextmanager
def in_process(plan: Plan) -> Iterator[Runner]:
    yield InProcess(plan, console_logger())


def run_sync(
    streams: list[str] | None = None,
    start: date | None = None,
    end: date | None = None,
    settings: Settings | None = None,
    runner: Callable[[Plan], AbstractContextManager[Runner]] = in_process,
) -> SyncReport:
    """Land the streams `streams` selects (everything without it) through `runner` (in this
    process by default), then bring the warehouse's views up to date once."""
    plan = plan_sync(streams, start, end, settings or load_settings())
    report = SyncReport()
    with runner(plan) as runs:
        written = land(plan, report, runs)
    report.warehouse, failed = refreshed(plan.settings, written)
    if failed:
        # The streams have landed; only the views are behind, and the report says why.
        report.fail("warehouse", str(failed), failed.exit_code)
    return report


def land(plan: Plan, report: SyncReport, runner: Runner) -> set[Written]:
    """Each run of the plan, over its days (`sync_days`), then each receiver's compaction,
    one after the other; returns what they wrote. A stream or a receiver that fails fails
    alone, told in `report`."""
    started_at = datetime.now(UTC)
    written: set[Written] = set()
    for run in plan.runs:
        days = None
        if run[0].partitioned:
            (stream,) = run  # a daily stream is a run of its own
            try:
                days = sync_days(stream, plan.lake, plan.settings, plan.asked, report)
            except Exception as error:
                report.fail(stream.relation, *told_error(error, plan.settings))
                continue
        runner.land(run, days, report)
        for stream in run:
            written |= written_by(stream, days, started_at)
        if days and any(plan.asked) and run[0].relation not in report.failed:
            written |= mended_edges(plan, report, runner, run[0], days, started_at)
    for receiver in plan.received:  # what the webhook and agent receivers stored
        try:
            written |= runner.compact(receiver, report)
        except Exception as error:
            report.fail(receiver.label, *told_error(error, plan.settings))
    return written


def mended_edges(
    plan: Plan,
    report: SyncReport,
    runner: Runner,
    stream: PulledStream,
    days: list[date],
    started_at: datetime,
) -> set[Written]:
    """After a backfill (`--start` or `--end`), the days beyond its edges that differ from
    the service landed again, or said with the sync that lands them (`pipelines/pull/edges.py`),
    in `report`'s notes; returns what the days landed again wrote. Comparing that fails is
    said and fails nothing: the range itself has landed."""
    landed_again: list[date] = []

    def land_again(days: list[date]) -> bool:
        again = SyncReport()
        runner.land([stream], days, again)
        for what, message in again.failed.items():
            report.fail(what, message, again.codes[what])
        if not again.failed:
            landed_again.extend(days)
        return not again.failed

    service = services(plan.settings)[stream.service]
    try:
        edges = mend_edges(stream, service, plan.lake, days, today(), land_again)
    except SyncError as error:
        report.notes.append(
            f"{stream.relation}: the days beyond {days[0]}..{days[-1]} were not compared with "
            f"the service: {error}"
        )
    else:
        report.notes.extend(edges.notes())
    return written_by(stream, landed_again, started_at) if landed_again else set()


def shared_instance() -> bool:
    """Whether DAGSTER_HOME keeps a Dagster instance: the command line's sync is then Dagster
    runs, shown in its UI with their checks (`assets/sync.py`); else it runs here."""
    return bool(os.environ.get("DAGSTER_HOME"))


def log_level() -> str:
    """What the command line prints (SYNC_LOG_LEVEL: DEBUG, INFO, WARNING, ERROR), read at
    each run."""
    return os.environ.get("SYNC_LOG_LEVEL", "INFO").upper()


def console_logger(level: str | None = None) -> logging.Logger:
    """The command line's console: each line its message alone, on stderr (stdout is the
    command's result), from `level` (`log_level`) up."""
    logger = logging.Logger("sync", level or log_level())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    return logger


def told_error(error: Exception, settings: Settings) -> tuple[str, int]:
    """What a stream's failure says, and its exit code: a product error's own message; the
    lake's disk or store failing, told with its setting; anything else by its class and
    message, its trace at DEBUG (`--debug`)."""
    fault = lake_fault(error, settings.lake_root)
    if fault is not None:
        error = fault
    if isinstance(error, SyncError):
        return str(error), error.exit_code
    if log_level() == "DEBUG":
        traceback.print_exception(error)
    return f"{type(error).__name__}: {error}", 1


def sync_days(
    stream: PulledStream,
    lake: Lake,
    settings: Settings,
    asked: tuple[date | None, date | None],
    report: SyncReport,
) -> list[date] | None:
    """The days a partitioned stream's run lands (None for the rest): `--start` to `--end`,
    else the one day policy (`days_to_sync`). Without both, damaged files of the days its
    service still serves are set aside first, so their days are missing and this sync lands
    them again (older days cannot be pulled again; with both, the landing reads every page
    of its own days' files). The range and what was done are noted in `report`."""
    if not stream.partitioned:
        return None
    oldest = first_sync_day()
    start, end = asked
    if start and end:
        first, last = start, end
    else:
        for found in set_aside_damaged(lake, stream, service_window(stream)):
            again = "" if found.foreign else "; this sync lands it again"
            report.notes.append(f"{stream.relation}: {found.what} set aside: {found}{again}")
        names = [c.name for c in settings.connections[stream.service]]
        first, last = days_to_sync(stream, lake, names, since=oldest)
        first, last = start or first, end or last
    if first < oldest:
        report.notes.append(
            f"{stream.relation}: days before {oldest} are older than the "
            "services serve (the first daily partition); synced from there"
        )
        first = oldest
    report.ranges[stream.relation] = (first, last)
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def refreshed(
    settings: Settings, written: set[Written] | None = None
) -> tuple[str, WarehouseBusy | WarehouseUnavailable | None]:
    """The views brought up to date: what was done, or why they could not be (a session's
    unsaved changes, the lake's disk or store failing), its message said for a person.
    `written`: what the sync's landings wrote, where known (`Warehouse.refresh`)."""
    try:
        done = refresh_warehouse(
            settings.lake_root, settings.warehouse_path, settings.warehouse_sql, written
        )
    except (WarehouseBusy, WarehouseUnavailable) as failed:
        return "", failed
    return done, None
