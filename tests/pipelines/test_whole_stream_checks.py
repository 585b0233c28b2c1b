"""A run's checks look at the days it landed; the job `whole_stream_checks` looks at every
day (assets/checks.py), and finds what only the whole stream shows."""

from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from assets.checks import STREAM_CHECKS, WHOLE_STREAM_JOB
from assets.partitions import daily
from assets.resources import LakeResource
from assets.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pipelines.lake import Lake
from pipelines.pull.damaged import damaged_of
from pipelines.pull.landing import PulledStream, today
from pipelines.stream import connection_schema

# Day-partitioned, as a stream's asset is, so its checks are too (`partitions_of`).
EVENTS = PulledStream(
    "test", "events", connection_schema([("id", pa.string())]), daily=True, rows=lambda _: []
)
KEY = dg.AssetKey(["test", "events"])
NEW = today() - timedelta(days=1)
OLD = NEW - timedelta(days=1)


def checked(lake: Lake, job_name: str, days: tuple[date, date] | None = None) -> dict:
    """Each check's evaluation in a run of `job_name` (of a range of `days`, as a landing's)."""
    job = dg.define_asset_job(job_name, selection=dg.AssetSelection.checks_for_assets(KEY))
    definitions = dg.Definitions(
        assets=[dg.AssetSpec(KEY, partitions_def=daily)],
        asset_checks=[check(EVENTS, KEY) for check in STREAM_CHECKS],
        jobs=[job],
        resources={"lake": LakeResource(lake_root=lake.root)},
    )
    tags = {}
    if days:
        tags = {
            ASSET_PARTITION_RANGE_START_TAG: days[0].isoformat(),
            ASSET_PARTITION_RANGE_END_TAG: days[1].isoformat(),
        }
    # A kept instance, as the UI reads: a throwaway one records each check once, without a day.
    with dg.instance_for_test() as instance:
        result = definitions.resolve_job_def(job_name).execute_in_process(
            tags=tags, instance=instance
        )
    evaluations = result.get_asset_check_evaluations()
    # A landing's run records its result on each of its days; the whole-stream job on none.
    days_recorded = {e.partition for e in evaluations}
    assert days_recorded == ({d.isoformat() for d in days} if days else {None})
    return {e.check_name: e for e in evaluations}


def flip_a_bit_of_the_first_page(path: Path) -> None:
    """One bit changed inside the `id` column's first page: the footer still reads."""
    data = bytearray(path.read_bytes())
    chunk = pq.read_metadata(path).row_group(0).column(1)
    data[(chunk.dictionary_page_offset or chunk.data_page_offset) + 64] ^= 0x10
    path.write_bytes(data)


def land(lake: Lake, day: date, ids: list[str]) -> None:
    lake.write(EVENTS, "default", [{"connection": "default", "id": i} for i in ids], day=day)


def test_a_key_repeated_across_days_is_found_by_the_whole_stream_job_only(tmp_path):
    lake = Lake(tmp_path)
    land(lake, OLD, ["a", "b"])
    land(lake, NEW, ["b", "c"])

    landing = checked(lake, "landing", (NEW, NEW))["ids_unique"]
    assert landing.passed
    assert landing.metadata["rows"].value == 2
    assert landing.metadata["scope"].value == f"days {NEW} to {NEW}"

    whole = checked(lake, WHOLE_STREAM_JOB)["ids_unique"]
    assert not whole.passed
    assert whole.metadata["repeated"].value == 1
    assert whole.metadata["scope"].value == "the whole stream"


def test_a_damaged_page_of_an_old_day_is_found_by_the_whole_stream_job(tmp_path):
    lake = Lake(tmp_path)
    land(lake, OLD, [f"id-{n:06d}-{n * 7919 % 100_003:06d}" for n in range(5_000)])
    land(lake, NEW, ["x"])
    old_file = Path(lake.path(EVENTS, "default", OLD))
    flip_a_bit_of_the_first_page(old_file)

    landing = checked(lake, "landing", (NEW, NEW))["files_readable"]
    assert landing.passed and landing.metadata["files"].value == 1
    assert old_file.exists()  # not read: not the run's day

    whole = checked(lake, WHOLE_STREAM_JOB)["files_readable"]
    assert not whole.passed
    assert str(old_file) in whole.description
    assert not old_file.exists() and len(damaged_of(lake, EVENTS)) == 1
