"""Each connection's health on a stream's asset in the UI: when it last landed, when it last
failed and why. Each landing carries the table forward from the asset's newest event that
holds it (a kept instance, `DAGSTER_HOME`); on a throwaway instance it shows that run alone.
`sync.connection_health` in the warehouse keeps every run's, whatever ran it
(pipelines/lake/run_history.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg

from pipelines.lake.run_history import connection_outcomes
from pipelines.pull.outcome import Landed

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


def connection_health(context: dg.AssetExecutionContext, landed: Landed) -> dg.TableMetadataValue:
    """The asset's table of connections, brought up to date with what `landed` says."""
    now = datetime.now(UTC).isoformat()
    known = {record.data["connection"]: dict(record.data) for record in _previous(context)}
    for part in connection_outcomes(landed.rows_per_connection, landed.failed):
        seen = known.setdefault(part["connection"], {})
        if part["outcome"] == "landed":
            seen.update(last_landed_at=now, last_landed_rows=part["rows"])
        else:
            seen.update(last_failed_at=now, last_error=part["error"])
    records = []
    for name, seen in sorted(known.items()):
        landed_at, failed_at = seen.get("last_landed_at"), seen.get("last_failed_at")
        failing = failed_at is not None and (landed_at is None or failed_at > landed_at)
        records.append(
            dg.TableRecord(
                {
                    "connection": name,
                    "failing": failing,
                    "last_landed_at": landed_at,
                    "last_landed_rows": seen.get("last_landed_rows"),
                    "last_failed_at": failed_at,
                    "last_error": seen.get("last_error"),
                }
            )
        )
    return dg.MetadataValue.table(records, schema=COLUMNS)


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
