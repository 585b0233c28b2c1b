"""The data hub's webhook events in the lake: the asset that compacts the receiver's inbox
into `datahub.webhook_events` (and the events it cannot represent into
`datahub.webhook_quarantine`, `pipelines/webhooks/compaction.py`), and the sensor that runs
it when the inbox holds events the lake lacks (docs/webhooks.md).
`python -m cli sync` runs it too."""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations.
import dagster as dg

from assets.factory import views_after
from assets.failures import tells_errors
from assets.inbox import compaction, landed
from assets.resources import LakeResource
from pipelines.webhooks.compaction import WEBHOOK_COMPACTION, WEBHOOK_EVENTS, compact_inbox


@dg.asset(
    **landed(
        WEBHOOK_EVENTS,
        "Every webhook event the receiver accepted, once each, by the UTC day of its "
        "`timestamp`: days holding events the lake lacks are rewritten whole from the inbox "
        "(`WEBHOOK_INBOX`, else the deployment's Postgres where `SYNC_STORE` is set, else "
        "`webhooks/inbox.sqlite3` beside the lake). An event whose "
        "`data` the warehouse cannot read as JSON goes to `datahub/webhook_quarantine` of its "
        "day instead, with the reason and its raw body.",
    )
)
@tells_errors
def webhook_events(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    done = compact_inbox(lake.lake_root, lake.lake(), context.log.info, context.log.warning)
    if not done.found:
        return dg.MaterializeResult(metadata={"rows": 0, "days": 0, "inbox": done.inbox})
    # The views are rebuilt only where they do not read what was written: a first file, a
    # new day, a closed day compacted again (pipelines/warehouse/__init__.py).
    warehouse = views_after(context, done.written())
    return dg.MaterializeResult(
        metadata={
            "rows": done.rows,
            "quarantined": done.quarantined,
            "days": len(done.days),
            "days_rewritten": [day.isoformat() for day in done.days],
            "inbox": done.inbox,
            "inbox_events": done.inbox_counts["events"],
            "inbox_rejected": done.inbox_counts["rejected"],
            "warehouse": warehouse,
        }
    )


datahub_webhooks, datahub_webhooks_sensor = compaction(
    "datahub_webhooks", webhook_events, WEBHOOK_COMPACTION
)


ASSETS = [webhook_events]
JOBS = [datahub_webhooks]
SENSORS = [datahub_webhooks_sensor]
