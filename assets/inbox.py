"""A receiver's compaction job and its sensor (assets/webhooks.py, assets/agent.py): the
sensor asks for the job's run while the inbox holds what the lake lacks, one run per batch:
the first at once, then at most one every `BATCH_SECONDS`, whatever arrived meanwhile (a live
receiver stores something every minute; a run a minute would bury every other run in the
UI's list). What differs between receivers is declared in the core
(`pipelines/inbox/compaction.py`, `InboxCompaction`)."""

import time
from typing import Any

import dagster as dg

from assets.catalog import stream_metadata
from assets.factory import owners, service_tag
from assets.resources import LakeResource
from pipelines.inbox.compaction import InboxCompaction
from pipelines.stream import Stream

#: The least time between two runs a sensor asks for: what arrives meanwhile waits for the
#: next batch (docs/dagster.md).
BATCH_SECONDS = 300


def compaction(
    name: str, asset: dg.AssetsDefinition, inbox: InboxCompaction
) -> tuple[Any, dg.SensorDefinition]:
    """The job `name` that compacts the inbox into `asset`, and its sensor `<name>_sensor`."""
    job = dg.define_asset_job(
        name,
        selection=dg.AssetSelection.assets(asset),
        description=f"Compact the {inbox.holds} of its inbox into {inbox.label}.",
    )

    @dg.sensor(
        name=f"{name}_sensor",
        job=job,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"Runs the compaction when the inbox holds {inbox.holds} the lake lacks: at once, "
            f"then at most once every {BATCH_SECONDS // 60} minutes, what arrived meanwhile "
            "in one run."
        ),
    )
    def sensor(context: dg.SensorEvaluationContext, lake: LakeResource):
        # The cursor is when the sensor last asked for a run (seconds since the epoch).
        due = float(context.cursor or 0) + BATCH_SECONDS
        if time.time() < due:
            return dg.SkipReason(
                f"a batch ran within {BATCH_SECONDS // 60} minutes; what arrived since waits "
                f"until {time.strftime('%H:%M:%S', time.gmtime(due))} UTC"
            )
        opened = inbox.opened(lake.lake_root)
        if opened is None:
            return dg.SkipReason(f"no inbox at {inbox.place.path(lake.lake_root)}")
        with opened:
            pending = inbox.pending(opened, lake.lake())
            inbox_uuid = opened.uuid
        if pending is None:
            return dg.SkipReason(f"every one of the inbox's {inbox.holds} is in the lake")
        context.update_cursor(str(time.time()))
        return dg.RunRequest(run_key=f"{inbox_uuid}-{pending}")

    return job, sensor


def landed(stream: Stream, description: str) -> dict[str, Any]:
    """A relation a receiver lands, as Dagster's asset (or asset spec) takes it: keyed and
    grouped by its service, described for the catalog by its columns."""
    return {
        "key": [stream.service, stream.name],
        "group_name": stream.service,
        "kinds": {"python", "parquet", "sqlite"},
        "metadata": stream_metadata(stream),
        "tags": service_tag(stream.service),
        "owners": owners(),
        "description": description,
    }
