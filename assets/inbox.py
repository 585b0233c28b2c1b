"""A receiver's compaction job and its sensor (assets/webhooks.py, assets/agent.py): the
sensor asks for the job's run while the inbox holds what the lake lacks, one run per newest
state of the inbox. What differs between receivers is declared in the core
(`pipelines/inbox/compaction.py`, `InboxCompaction`)."""

from typing import Any

import dagster as dg

from assets.catalog import stream_metadata
from assets.factory import owners, service_tag
from assets.resources import LakeResource
from pipelines.inbox.compaction import InboxCompaction
from pipelines.stream import Stream


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
        description=f"Runs the compaction when the inbox holds {inbox.holds} the lake lacks.",
    )
    def sensor(lake: LakeResource) -> dg.RunRequest | dg.SkipReason:
        opened = inbox.opened(lake.lake_root)
        if opened is None:
            return dg.SkipReason(f"no inbox at {inbox.place.path(lake.lake_root)}")
        with opened:
            pending = inbox.pending(opened, lake.lake())
            inbox_uuid = opened.uuid
        if pending is None:
            return dg.SkipReason(f"every one of the inbox's {inbox.holds} is in the lake")
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
