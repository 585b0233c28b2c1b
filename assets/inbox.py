"""The sensor a receiver's inbox has (assets/webhooks.py, assets/agent.py): it asks for the
compaction job's run while the inbox holds what the lake lacks, one run per newest state of
the inbox."""

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg

from assets.resources import LakeResource
from pipelines.lake import Lake


def inbox_sensor(
    job: Any,  # what `dg.define_asset_job` returns
    *,
    description: str,
    opened: Callable[[str], Any],
    inbox_path: Callable[[str], Path],
    stale_days: Callable[[Any, Lake], dict[date, Any]],
    newest: Callable[[dict[date, Any]], str],
    up_to_date: str,
) -> dg.SensorDefinition:
    """`opened(lake_root)`: the inbox, None where there is none yet; `stale_days`: the days
    whose files lack what it holds, with its newest ids for each; `newest` names that state
    in the run key, so an evaluation while the run is queued asks for no other."""

    @dg.sensor(
        name=f"{job.name}_sensor",
        job=job,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=description,
    )
    def sensor(lake: LakeResource) -> dg.RunRequest | dg.SkipReason:
        inbox = opened(lake.lake_root)
        if inbox is None:
            return dg.SkipReason(f"no inbox at {inbox_path(lake.lake_root)}")
        with inbox:
            stale = stale_days(inbox, lake.lake())
            inbox_uuid = inbox.uuid
        if not stale:
            return dg.SkipReason(up_to_date)
        return dg.RunRequest(run_key=f"{inbox_uuid}-{newest(stale)}")

    return sensor
