"""`python -m pipelines sync`: the whole pull for scripts and cron. Each stream lands through
the core's one run of a stream (`pipelines/stream_run.py`), in this process; where
DAGSTER_HOME keeps an instance, through the same Dagster assets the UI runs instead, so the
runs and their checks show in the UI.

Without a range, each daily stream pulls the days of the one day policy (`days_to_sync`):
what is missing from the days its service still serves, plus yesterday and today (what can
still change): on an empty lake that is everything; on a synced one, two days.
"""

import importlib
import os
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from types import ModuleType

import dagster as dg

from assets import agent, webhooks
from assets.console import FAILURE_CLASS, LOGGERS, console_config, log_level, own_lines_logger
from assets.factory import STARTED_BY_TAG, VIEWS_AT_END, VIEWS_TAG
from assets.failures import EXIT_CODE
from assets.partitions import daily
from assets.resources import build_resources
from assets.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pipelines.agent.compaction import STREAMS as AGENT_STREAMS
from pipelines.agent.compaction import compact_inbox as compact_agent
from pipelines.errors import SetupError, SyncError
from pipelines.inbox.compaction import Compacted, Log
from pipelines.lake import Lake, LakeLocation
from pipelines.lake.object_store import lake_fault
from pipelines.mistakes import misnamed
from pipelines.pull.damaged import set_aside_damaged
from pipelines.pull.landing import PulledStream
from pipelines.settings import Settings, load_settings
from pipelines.stream import Stream
from pipelines.stream_run import days_to_sync, run_stream, service_window, written_by
from pipelines.warehouse import WarehouseBusy, WarehouseUnavailable, Written
from pipelines.warehouse.relations import PULLED, refresh_warehouse
from pipelines.webhooks.compaction import WEBHOOK_EVENTS, WEBHOOK_QUARANTINE
from pipelines.webhooks.compaction import compact_inbox as compact_webhooks

FIRST_PARTITION = daily.start.date()
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


def service_module(service: str) -> ModuleType:
    """A service's assets and checks (`assets/comment.py`, ...), imported when a sync first
    runs one of its streams: a sync of one service does not build the others' assets."""
    return importlib.import_module(f"assets.{service}")


def _asset_for(stream: PulledStream) -> dg.AssetsDefinition:
    return service_module(stream.service).ASSETS[stream.name]


@dataclass(frozen=True)
class Received:
    """Relations a receiver stores and a sync lands by compacting its inbox into the lake:
    `compact` lands them all (`compact_inbox` of `pipelines/webhooks/compaction.py` or
    `pipelines/agent/compaction.py`), as one run of `assets` does in Dagster."""

    job: str
    assets: list[dg.AssetsDefinition]
    streams: tuple[Stream, ...]
    compact: Callable[[str, Lake, Log, Log], Compacted]

    @property
    def label(self) -> str:
        return ", ".join(stream.relation for stream in self.streams)


#: The receivers' relations: the data hub's webhooks, the AI agent's turns.
RECEIVED = [
    Received(
        "sync_datahub_webhook_events",
        webhooks.ASSETS,
        (WEBHOOK_EVENTS, WEBHOOK_QUARANTINE),
        compact_webhooks,
    ),
    Received("sync_conversation_agent", agent.ASSETS, tuple(AGENT_STREAMS), compact_agent),
]


def _names(stream: Stream) -> set[str]:
    """What `--streams` knows a stream by: its service, its name, its relation."""
    return {stream.service, stream.name, stream.relation}


def selectable() -> list[Stream]:
    """Every stream a sync lands: the pulled ones, then the receivers'."""
    return [*PULLED, *(stream for received in RECEIVED for stream in received.streams)]


def unknown_names(names: list[str]) -> str | None:
    """What is wrong with the names `--streams` was given; None when each names a service,
    a stream or a relation."""
    unknown = misnamed(names, sorted({name for stream in selectable() for name in _names(stream)}))
    if not unknown:
        return None
    return f"--streams: no stream is named {unknown}"


def select_streams(names: list[str] | None) -> tuple[list[PulledStream], list[Received]]:
    """The pulled streams and the receivers `names` select: a service (`comment`, every one
    of its relations), a stream (`trigger_logs`) or a relation (`comment.trigger_logs`);
    none means everything. A name that selects nothing is a `SetupError` (`unknown_names`)."""
    if not names:
        return list(PULLED), list(RECEIVED)
    problem = unknown_names(names)
    if problem:
        raise SetupError(f"{problem}; `python -m pipelines sync --help` lists them")
    wanted = set(names)
    pulled = [s for s in PULLED if _names(s) & wanted]
    received = [r for r in RECEIVED if any(_names(s) & wanted for s in r.streams)]
    return pulled, received


@contextmanager
def dagster_instance() -> Iterator[dg.DagsterInstance]:
    """The instance of DAGSTER_HOME when set (runs show in the UI), else a throwaway one,
    disposed on exit (an instance left to the garbage collector closes its SQLite
    connections from whatever thread collects it, which SQLite refuses noisily)."""
    made = dg.DagsterInstance.get() if shared_instance() else dg.DagsterInstance.ephemeral()
    with made as instance:
        yield instance


def shared_instance() -> bool:
    """Whether a Dagster instance is kept (DAGSTER_HOME): the command line's runs are then
    Dagster runs, shown in its UI with their checks; else they run here, without Dagster."""
    return bool(os.environ.get("DAGSTER_HOME"))


def _checks_of(assets: list[dg.AssetsDefinition]) -> list[dg.AssetChecksDefinition]:
    keys = {key for a in assets for key in a.keys}
    services = sorted({key.path[0] for key in keys})
    checks = [c for service in services for c in service_module(service).CHECKS]
    return [c for c in checks if {k.asset_key for k in c.check_keys} & keys]


def _innermost(event: dg.DagsterEvent):
    error = event.step_failure_data.error
    while error.cause is not None:
        error = error.cause
    return error


def failure_code(event: dg.DagsterEvent) -> int:
    """The exit code of a step failure: its error's, where the step told one of the
    product's (`assets/failures.py`), else 1."""
    told = event.step_failure_data.user_failure_data
    if told is not None and EXIT_CODE in told.metadata:
        return told.metadata[EXIT_CODE].value
    return 1


def failure_reason(event: dg.DagsterEvent) -> str:
    """A step failure's innermost cause: Dagster wraps it in 'Error occurred while …'."""
    error = _innermost(event)
    if error.cls_name == "Failure":  # raised with its whole explanation
        return error.message.strip().removeprefix(FAILURE_CLASS)
    return f"{error.cls_name}: {error.message.strip()}"


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


def job_name(streams: list[PulledStream]) -> str:
    """What the UI lists a sync run under: the service and the streams it synced."""
    return "_".join(["sync", streams[0].service, *(s.name for s in streams)])


def _run(
    name: str, assets, resources, instance, report: SyncReport, label: str, tags=None
) -> dg.ExecuteInProcessResult:
    """One run of a job named for what it syncs, so that it reads in the UI's run list (an
    unnamed one shows as `__ephemeral_asset_job__` with no targets)."""
    job = dg.define_asset_job(name, selection=dg.AssetSelection.assets(*assets))
    job_def = dg.Definitions(
        assets=assets,
        asset_checks=_checks_of(assets),
        jobs=[job],
        # The assets and checks return results, never an output an IO manager would store;
        # Dagster's default one (files) would only cost its imports (fsspec, universal_pathlib).
        # The run is in this process, so memory is a valid one.
        resources={"io_manager": dg.mem_io_manager, **resources},
        loggers=LOGGERS,
    ).resolve_job_def(name)
    result = job_def.execute_in_process(
        instance=instance,
        # The views are built once, when every run of the sync has ended (`run_sync`).
        tags={**(tags or {}), STARTED_BY_TAG: COMMAND_LINE, VIEWS_TAG: VIEWS_AT_END},
        raise_on_error=False,
        run_config=console_config(),
    )
    for event in result.all_events:
        if event.is_step_failure:
            # Named as the relation it lands (`comment__trigger_logs` is Dagster's name).
            what = event.step_key.replace("__", ".")
            report.fail(what, failure_reason(event), failure_code(event))
    if result.success:
        report.succeeded.append(label)
    elif not report.failed:
        failure = next((e.message for e in result.all_events if e.is_run_failure), None)
        report.fail(label, failure or "the run failed", 1)
    return result


def compacted(result: dg.ExecuteInProcessResult) -> set[Written]:
    """What a receiver's run rewrote in the lake, from its materializations: each names its
    relation and `days_rewritten`; the webhook events' quarantine too, where events went
    there (`assets/webhooks.py`)."""
    written: set[Written] = set()
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        metadata = {name: value.value for name, value in materialization.metadata.items()}
        days = [date.fromisoformat(day) for day in metadata.get("days_rewritten", [])]
        relations = [".".join(materialization.asset_key.path)]
        if metadata.get("quarantined"):
            relations.append(WEBHOOK_QUARANTINE.relation)
        written |= {(relation, day) for relation in relations for day in days}
    return written


def run_sync(
    streams: list[str] | None = None,
    start: date | None = None,
    end: date | None = None,
    settings: Settings | None = None,
) -> SyncReport:
    """Land the streams `streams` selects (`select_streams`; everything without it), then
    bring the warehouse's views up to date: through Dagster where its instance is kept
    (`shared_instance`), else in this process."""
    settings = settings or load_settings()
    pulled, received = select_streams(streams)
    lake = Lake(settings.lake_root)
    lake.sweep_temporary()
    report = SyncReport()
    runs = run_order([s for s in pulled if settings.connections[s.service]])
    plan = Plan(runs, received, settings, lake, (start, end))
    written = (in_dagster if shared_instance() else in_this_process)(plan, report)
    # The views are brought up to date once, here (the runs leave it: `VIEWS_TAG`), with
    # what the landings and compactions wrote.
    report.warehouse, failed = refreshed(settings, written)
    if failed:
        # The streams have landed; only the views are behind, and the report says why.
        report.fail("warehouse", str(failed), failed.exit_code)
    return report


@dataclass(frozen=True)
class Plan:
    """What a sync lands: its runs of pulled streams (`run_order`), its receivers, and the
    days asked for (`--start`, `--end`, either None)."""

    runs: list[list[PulledStream]]
    received: list[Received]
    settings: Settings
    lake: Lake
    asked: tuple[date | None, date | None]


def in_this_process(plan: Plan, report: SyncReport) -> set[Written]:
    """Each stream's run (`pipelines/stream_run.run_stream`) and each receiver's compaction,
    one after the other in this process; returns what they wrote."""
    settings, lake = plan.settings, plan.lake
    resources = build_resources(settings)
    location: LakeLocation = resources["lake"]
    console = own_lines_logger(log_level())
    started_at = datetime.now(UTC)
    written: set[Written] = set()
    for stream in (stream for run in plan.runs for stream in run):
        try:
            days = sync_days(stream, lake, settings, plan.asked, report)
        except Exception as error:  # each stream fails alone, told
            report.fail(stream.relation, *told_error(error, settings))
            continue
        try:
            run = run_stream(
                stream,
                resources[stream.service],
                location,
                days,
                run_id=str(uuid.uuid4()),
                started_by=COMMAND_LINE,
                log=console.info,
                warn=console.warning,
                build_views=False,
            )
        except Exception as error:
            report.fail(stream.relation, *told_error(error, settings))
        else:
            if run.landed.failed:
                report.fail(stream.relation, run.failure(), 1)
            else:
                report.succeeded.append(stream.relation)
        written |= written_by(stream, days, started_at)
    for receiver in plan.received:  # what the webhook and agent receivers stored
        try:
            done = receiver.compact(location.lake_root, lake, console.info, console.warning)
        except Exception as error:
            report.fail(receiver.label, *told_error(error, settings))
            continue
        written |= done.written()
        report.succeeded.append(receiver.label)
    return written


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


def in_dagster(plan: Plan, report: SyncReport) -> set[Written]:
    """Each run of `run_order` and each receiver's as a run of the kept Dagster instance,
    shown in its UI with its checks; returns what they wrote."""
    settings, lake = plan.settings, plan.lake
    resources = build_resources(settings)
    started_at = datetime.now(UTC)
    written: set[Written] = set()
    with dagster_instance() as instance:
        for run in plan.runs:
            assets = [_asset_for(stream) for stream in run]
            label = ", ".join(stream.relation for stream in run)
            days = None
            if run[0].partitioned:
                (stream,) = run
                try:
                    days = sync_days(stream, lake, settings, plan.asked, report)
                except Exception as error:  # the stream fails alone, told
                    report.fail(stream.relation, *told_error(error, settings))
                    continue
            _run(job_name(run), assets, resources, instance, report, label, range_tags(days))
            for stream in run:
                written |= written_by(stream, days, started_at)
        for receiver in plan.received:
            run = _run(receiver.job, receiver.assets, resources, instance, report, receiver.label)
            written |= compacted(run)
    return written


def range_tags(days: list[date] | None) -> dict[str, str] | None:
    """A Dagster run's tags for a range of days, oldest first."""
    if not days:
        return None
    return {
        ASSET_PARTITION_RANGE_START_TAG: days[0].isoformat(),
        ASSET_PARTITION_RANGE_END_TAG: days[-1].isoformat(),
    }


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
    start, end = asked
    if start and end:
        first, last = start, end
    else:
        for found in set_aside_damaged(lake, stream, service_window(stream)):
            report.notes.append(
                f"{stream.relation}: damaged file set aside: {found}; this sync lands it again"
            )
        names = [c.name for c in settings.connections[stream.service]]
        first, last = days_to_sync(stream, lake, names, since=FIRST_PARTITION)
        first, last = start or first, end or last
    if first < FIRST_PARTITION:
        report.notes.append(
            f"{stream.relation}: days before {FIRST_PARTITION} are older than the "
            "services serve (the first daily partition); synced from there"
        )
        first = FIRST_PARTITION
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
