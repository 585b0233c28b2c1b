"""`python -m cli sync` where DAGSTER_HOME keeps an instance: the core's one sync
(`pipelines/sync.py`, `run_sync`: which streams, in which order, for which days, a failing
one failing alone) with its runs as Dagster runs of the same assets the UI runs
(`DagsterRuns`), so the runs and their checks show in the UI. Without DAGSTER_HOME the same
sync runs them in its own process, with no Dagster (`cli/main.py`, `run_sync`, chooses).
"""

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from types import ModuleType

import dagster as dg

from assets import agent, webhooks
from assets.console import FAILURE_CLASS, LOGGERS, console_config
from assets.factory import STARTED_BY_TAG, VIEWS_AT_END, VIEWS_TAG
from assets.failures import EXIT_CODE
from assets.resources import build_resources
from assets.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pipelines.inbox.compaction import InboxCompaction
from pipelines.process import lasting_imports
from pipelines.pull.landing import PulledStream
from pipelines.sync import COMMAND_LINE, Plan, SyncReport, shared_instance
from pipelines.warehouse import Written
from pipelines.webhooks.compaction import WEBHOOK_QUARANTINE

#: Each receiver's Dagster run (`pipelines/sync.py`, `RECEIVERS`): its job's name, its assets.
RECEIVER_RUNS = {
    "webhooks": ("sync_datahub_webhook_events", webhooks.ASSETS),
    "agent": ("sync_conversation_agent", agent.ASSETS),
}


def service_module(service: str) -> ModuleType:
    """A service's assets and checks (`assets/comment.py`, ...), imported when a sync first
    runs one of its streams: a sync of one service does not build the others' assets."""
    with lasting_imports():
        return importlib.import_module(f"assets.{service}")


def _asset_for(stream: PulledStream) -> dg.AssetsDefinition:
    return service_module(stream.service).ASSETS[stream.name]


@contextmanager
def dagster_instance() -> Iterator[dg.DagsterInstance]:
    """The instance of DAGSTER_HOME when set (runs show in the UI), else a throwaway one,
    disposed on exit (an instance left to the garbage collector closes its SQLite
    connections from whatever thread collects it, which SQLite refuses noisily)."""
    made = dg.DagsterInstance.get() if shared_instance() else dg.DagsterInstance.ephemeral()
    with made as instance:
        yield instance


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


@dataclass
class DagsterRuns:
    """Each run of a sync as a run of a kept Dagster instance, shown in its UI with its
    checks (`sync.Runner`)."""

    instance: dg.DagsterInstance
    resources: dict

    def land(self, run: list[PulledStream], days: list[date] | None, report: SyncReport) -> None:
        assets = [_asset_for(stream) for stream in run]
        label = ", ".join(stream.relation for stream in run)
        _run(job_name(run), assets, self.resources, self.instance, report, label, range_tags(days))

    def compact(self, receiver: InboxCompaction, report: SyncReport) -> set[Written]:
        job, assets = RECEIVER_RUNS[receiver.name]
        return compacted(_run(job, assets, self.resources, self.instance, report, receiver.label))


@contextmanager
def in_dagster(plan: Plan) -> Iterator[DagsterRuns]:
    """The sync's runs as runs of the kept Dagster instance (`dagster_instance`)."""
    with dagster_instance() as instance:
        yield DagsterRuns(instance, build_resources(plan.settings))


def range_tags(days: list[date] | None) -> dict[str, str] | None:
    """A Dagster run's tags for a range of days, oldest first."""
    if not days:
        return None
    return {
        ASSET_PARTITION_RANGE_START_TAG: days[0].isoformat(),
        ASSET_PARTITION_RANGE_END_TAG: days[-1].isoformat(),
    }
