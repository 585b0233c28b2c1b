"""The run tags Dagster sets that the product reads or sets: which days a run is for, and
what started it. Dagster 1.13 names them only in a private module
(`dagster._core.storage.tags`); they are the tags its UI shows on every run, written out
here, and tests/pipelines/test_dagster_api.py checks each against Dagster's own, so an
upgrade that renames one fails a test instead of a run."""

#: A run of one day: its partition key.
PARTITION_NAME_TAG = "dagster/partition"
#: A run over days (a backfill of single-run assets, a sync, the hourly schedules): the
#: first and the last day, both included.
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
#: What started a run, where something did.
SCHEDULE_NAME_TAG = "dagster/schedule_name"
SENSOR_NAME_TAG = "dagster/sensor_name"
BACKFILL_ID_TAG = "dagster/backfill"
AUTOMATION_CONDITION_TAG = "dagster/from_automation_condition"
#: "true" on a failed run that Dagster will retry.
WILL_RETRY_TAG = "dagster/will_retry"
