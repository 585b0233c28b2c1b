"""Each connection's health on a stream's asset in the UI: when it last landed, when it last
failed and why, and whether it is failing. Each landing carries the table forward from the
asset's newest event that holds it (a kept instance, `DAGSTER_HOME`); on a throwaway
instance it shows that run alone. `sync.connection_health` in the warehouse keeps every
run's, whatever ran it (pipelines/lake/run_history.py), and decides for both
(pipelines/warehouse/health.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

import dagster as dg

from pipelines.lake.run_history import connection_outcomes
from pipelines.pull.outcome import Landed
from pipelines.warehouse.health import connection_health as health_of

#: The metadata key of the table, on the asset's materialization (a snapshot stream) or its
#: run's observation (a daily stream).
HEALTH = "connection_health"
COLUMNS = dg.TableSchema(
    columns=[
        dg.TableColumn("connection", "string"),
        dg.TableColumn("failing", "bool", description="Failed since it last landed."),
        dg.TableColumn("last_landed_at", "string", description="UTC, ISO 8601."),
        dg.TableColumn("last_landed_rows", "int"),
        dg.TableColumn("last_failed_at", "string", description="UTC, ISO 8601."),
        dg.TableColumn("last_error", "string", description="What failed, with what to do."),
    ]
)
COLUMNS_SHOWN = [column.name for column in COLUMNS.columns]
#: The one relation of the runs handed to the view: each asset's table is its own.
RELATION = "asset"


def connection_health(context: dg.AssetExecutionContext, landed: Landed) -> dg.TableMetadataValue:
    """The asset's table of connections, brought up to date with what `landed` says: the
    warehouse's view over the table before and this run."""
    now = datetime.now(UTC)
    this_run = connection_outcomes(landed.rows_per_connection, landed.failed)
    runs = [run for record in _previous(context) for run in _runs_of(record.data)]
    runs.append({"relation": RELATION, "ended_at": now, "connections": this_run})
    records = [
        dg.TableRecord({name: _shown(row[name]) for name in COLUMNS_SHOWN})
        for row in health_of(runs)
    ]
    return dg.MetadataValue.table(records, schema=COLUMNS)


def _runs_of(seen: Mapping) -> Iterator[dict]:
    """A connection's row of the table before as the runs the view reads: its last landing
    and its last failure. The view keeps only the newest of each, so these two stand for
    every run before them."""
    connection, rows = seen["connection"], seen.get("last_landed_rows")
    last = (
        ("landed", seen.get("last_landed_at"), None),
        ("failed", seen.get("last_failed_at"), seen.get("last_error")),
    )
    for outcome, at, error in last:
        if at is not None:
            part = {"connection": connection, "outcome": outcome, "rows": rows, "error": error}
            ended_at = datetime.fromisoformat(at)
            yield {"relation": RELATION, "ended_at": ended_at, "connections": [part]}


def _shown(value: object) -> object:
    """A value as the table holds it: a time as UTC ISO 8601 text."""
    return value.isoformat() if isinstance(value, datetime) else value


def _previous(context: dg.AssetExecutionContext) -> list[dg.TableRecord]:
    """The table of the asset's newest materialization or observation that holds one."""
    instance, key = context.instance, context.asset_key
    newest = [
        record.event_log_entry
        for fetch in (instance.fetch_materializations, instance.fetch_observations)
        for record in fetch(key, limit=1).records
    ]
    for entry in sorted(newest, key=lambda entry: entry.timestamp, reverse=True):
        event = entry.asset_materialization or entry.asset_observation
        table = event.metadata.get(HEALTH) if event is not None else None
        if isinstance(table, dg.TableMetadataValue):
            return list(table.records)
    return []
