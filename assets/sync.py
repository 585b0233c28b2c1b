"""`python -m pipelines sync`: the whole pull for scripts and cron, through the same Dagster
assets the UI runs (so a run here shows up in the UI when DAGSTER_HOME is shared).

Without a range, each daily stream pulls what is missing from the days its service still
serves, plus yesterday and today (what can still change): on an empty lake that is
everything; on a synced one, two days.
"""

import os
from dataclasses import dataclass, field
from datetime import date, timedelta

import dagster as dg
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)

from assets import definitions, webhooks
from assets.resources import build_resources
from pipelines.catalog import refresh_warehouse
from pipelines.lake import Lake, Stream
from pipelines.landing import today
from pipelines.settings import Settings, load_settings

#: The console log level of sync runs (SYNC_LOG_LEVEL: DEBUG, INFO, WARNING, ERROR).
LOG_LEVEL = os.environ.get("SYNC_LOG_LEVEL", "INFO")


@dataclass
class SyncReport:
    succeeded: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    ranges: dict[str, tuple[date, date]] = field(default_factory=dict)
    warehouse: str = ""

    @property
    def ok(self) -> bool:
        return not self.failed


def _asset_for(stream: Stream) -> dg.AssetsDefinition:
    key = dg.AssetKey([stream.service, stream.name])
    return next(a for a in definitions.STREAM_ASSETS if a.key == key)


def select_streams(names: list[str] | None) -> list[Stream]:
    """`comment`, `trigger_logs` or `comment.trigger_logs`; none means every stream."""
    if not names:
        return list(definitions.STREAMS)
    chosen = [s for s in definitions.STREAMS if {s.service, s.name, s.relation} & set(names)]
    unknown = set(names) - {n for s in chosen for n in (s.service, s.name, s.relation)}
    if unknown:
        known = ", ".join(s.relation for s in definitions.STREAMS)
        raise SystemExit(f"unknown stream(s) {sorted(unknown)}; known: {known}")
    return chosen


def default_range(stream: Stream, lake: Lake, connections: list[str]) -> tuple[date, date]:
    last = today()
    served = [last - timedelta(days=n) for n in range(stream.history_days)]
    missing = [d for d in served if any(d not in lake.days(stream, c) for c in connections)]
    return min([*missing, last - timedelta(days=1)]), last


def dagster_instance() -> dg.DagsterInstance:
    """The instance of DAGSTER_HOME when set (runs show in the UI), else a throwaway one."""
    return (
        dg.DagsterInstance.get()
        if os.environ.get("DAGSTER_HOME")
        else dg.DagsterInstance.ephemeral()
    )


def _checks_of(assets: list[dg.AssetsDefinition]) -> list[dg.AssetChecksDefinition]:
    keys = {a.key for a in assets}
    checks = [c for m in definitions.SERVICES.values() for c in m.CHECKS]
    return [c for c in checks if {k.asset_key for k in c.check_keys} & keys]


def failure_reason(event: dg.DagsterEvent) -> str:
    """A step failure's innermost cause: Dagster wraps it in 'Error occurred while …'."""
    error = event.step_failure_data.error
    while error.cause is not None:
        error = error.cause
    return f"{error.cls_name}: {error.message.strip()}"


def _run(assets, resources, instance, report: SyncReport, label: str, tags=None) -> None:
    result = dg.materialize(
        [*assets, *_checks_of(assets)],
        resources=resources,
        instance=instance,
        tags=tags,
        raise_on_error=False,
        # Dagster's console logger speaks at DEBUG (every step event); scripts and cron want
        # what each stream landed and what failed.
        run_config={"loggers": {"console": {"config": {"log_level": LOG_LEVEL}}}},
    )
    for event in result.all_events:
        if event.is_step_failure:
            report.failed[event.step_key] = failure_reason(event)
    if result.success:
        report.succeeded.append(label)
    elif not report.failed:
        report.failed[label] = "the run failed"


def run_sync(
    streams: list[str] | None = None,
    start: date | None = None,
    end: date | None = None,
    settings: Settings | None = None,
) -> SyncReport:
    settings = settings or load_settings()
    resources = build_resources(settings)
    lake = Lake(settings.lake_root)
    lake.sweep_temporary()
    # Disposed at the end: an instance left to the garbage collector closes its SQLite
    # connections from whatever thread collects it, which SQLite refuses noisily.
    with dagster_instance() as instance:
        report = SyncReport()
        chosen = select_streams(streams)
        # Daily streams first: some snapshots are derived from them (conversation members are
        # the members seen in messages).
        chosen = [s for s in chosen if settings.connections[s.service]]
        partitioned = [s for s in chosen if _asset_for(s).partitions_def is not None]
        for stream in partitioned:
            names = [c.name for c in settings.connections[stream.service]]
            first, last = default_range(stream, lake, names)
            first, last = start or first, end or last
            report.ranges[stream.relation] = (first, last)
            tags = {
                ASSET_PARTITION_RANGE_START_TAG: first.isoformat(),
                ASSET_PARTITION_RANGE_END_TAG: last.isoformat(),
            }
            _run([_asset_for(stream)], resources, instance, report, stream.relation, tags)
        snapshots = [_asset_for(s) for s in chosen if s not in partitioned]
        if snapshots:
            _run(snapshots, resources, instance, report, "snapshots")
        if not streams:  # a full sync also lands the webhook events the receiver stored
            _run(webhooks.ASSETS, resources, instance, report, "datahub.webhook_events")
    report.warehouse = refresh_warehouse(
        settings.lake_root, settings.warehouse_path, settings.warehouse_sql
    )
    return report
