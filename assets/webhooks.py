"""The data hub's webhook events in the lake: the asset that compacts the receiver's inbox
into `datahub.webhook_events` (and the events it cannot represent into
`datahub.webhook_quarantine`, `pipelines/webhooks/compaction.py`), and the sensor that runs
it when the inbox holds events the lake lacks (docs/webhooks.md).
`python -m pipelines sync` runs it too."""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations.
import dagster as dg

from assets.catalog import stream_metadata
from assets.factory import owners, refresh_views, service_tag
from assets.resources import LakeResource
from assets.told import told
from pipelines.webhooks.compaction import (
    WEBHOOK_EVENTS,
    WEBHOOK_QUARANTINE,
    compact,
    stale_days,
)
from pipelines.webhooks.inbox import inbox_path, open_inbox


@dg.asset(
    key=[WEBHOOK_EVENTS.service, WEBHOOK_EVENTS.name],
    group_name=WEBHOOK_EVENTS.service,
    kinds={"python", "parquet", "sqlite"},
    metadata=stream_metadata(WEBHOOK_EVENTS),
    tags=service_tag(WEBHOOK_EVENTS.service),
    owners=owners(),
    description=(
        "Every webhook event the receiver accepted, once each, by the UTC day of its "
        "`timestamp`: days holding events the lake lacks are rewritten whole from the inbox "
        "(`WEBHOOK_INBOX`, else the deployment's Postgres where `SYNC_STORE` is set, else "
        "`webhooks/inbox.sqlite3` beside the lake). An event whose "
        "`data` the warehouse cannot read as JSON goes to `datahub/webhook_quarantine` of its "
        "day instead, with the reason and its raw body."
    ),
)
@told
def webhook_events(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    inbox = open_inbox(lake.lake_root, create=False)
    if inbox is None:
        path = inbox_path(lake.lake_root)
        context.log.info(f"{WEBHOOK_EVENTS.relation}: no inbox at {path}, nothing to compact")
        return dg.MaterializeResult(metadata={"rows": 0, "days": 0, "inbox": str(path)})
    with inbox:
        done = compact(inbox, lake.lake())
        counts = inbox.counts()
    context.log.info(
        f"{WEBHOOK_EVENTS.relation}: {done.rows} rows over {len(done.days)} day(s) rewritten"
    )
    if done.quarantined:
        context.log.warning(
            f"{WEBHOOK_QUARANTINE.relation}: {done.quarantined} event(s) of those days "
            "cannot be rows of webhook_events; kept there with the reason and the raw body"
        )
    # The views are rebuilt only where they do not read what was written: a first file, a
    # new day, a closed day compacted again (pipelines/warehouse.py).
    streams = (WEBHOOK_EVENTS, WEBHOOK_QUARANTINE) if done.quarantined else (WEBHOOK_EVENTS,)
    written = {(s.relation, day) for s in streams for day in done.days}
    warehouse = refresh_views(context, written)
    return dg.MaterializeResult(
        metadata={
            "rows": done.rows,
            "quarantined": done.quarantined,
            "days": len(done.days),
            "days_rewritten": [day.isoformat() for day in done.days],
            "inbox": inbox.location,
            "inbox_events": counts["events"],
            "inbox_rejected": counts["rejected"],
            "warehouse": warehouse,
        }
    )


datahub_webhooks = dg.define_asset_job(
    "datahub_webhooks",
    selection=dg.AssetSelection.assets(webhook_events),
    description="Compact the webhook inbox into datahub.webhook_events.",
)


@dg.sensor(
    job=datahub_webhooks,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Runs the compaction when the inbox holds events the lake lacks.",
)
def datahub_webhooks_sensor(lake: LakeResource) -> dg.RunRequest | dg.SkipReason:
    inbox = open_inbox(lake.lake_root, create=False)
    if inbox is None:
        return dg.SkipReason(f"no webhook inbox at {inbox_path(lake.lake_root)}")
    with inbox:
        stale = stale_days(inbox, lake.lake())
        inbox_uuid = inbox.uuid
    if not stale:
        return dg.SkipReason("every stored webhook event is in the lake")
    # One run per newest inbox row: an evaluation while that run is queued asks for no other.
    return dg.RunRequest(run_key=f"{inbox_uuid}-{max(stale.values())}")


ASSETS = [webhook_events]
JOBS = [datahub_webhooks]
SENSORS = [datahub_webhooks_sensor]
