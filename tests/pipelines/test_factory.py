"""The asset factory (assets/factory.py) on streams of its own: each day of a range run
records its own figures, days the service no longer serves are not asked for and say so,
a refusal fails the run with its message, no traceback, and the catalog shows each asset's
columns, service and rows."""

from datetime import date, timedelta

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)

from assets.factory import StreamAsset, stream_asset
from assets.resources import LakeResource
from pipelines.lake import Lake
from pipelines.landing import Landed, Refused, today
from pipelines.stream import EXTRA, connection_stream, described

THINGS = connection_stream("test", "things", [("id", pa.int64())], daily=True)
#: A snapshot stream with a described column.
LABELS = connection_stream("test", "labels", [described("id", pa.int64(), "The label's id.")])
#: A stream whose service answers for the last 3 days only.
RECENT = connection_stream("test", "recent", [("id", pa.int64())], daily=True, served_days=3)


class Settings(dg.ConfigurableResource):
    """Stands for the service's resource, which the factory hands to the landing."""

    name: str = "settings"


def materialize(
    tmp_path, declared: StreamAsset, first: date, last: date
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [stream_asset(declared)],
        resources={"lake": LakeResource(lake_root=str(tmp_path)), "test": Settings()},
        tags={
            ASSET_PARTITION_RANGE_START_TAG: first.isoformat(),
            ASSET_PARTITION_RANGE_END_TAG: last.isoformat(),
        },
        raise_on_error=False,
    )


def day_metadata(result, node: str) -> dict[str, dict]:
    return {
        m.partition: {name: value.value for name, value in m.metadata.items()}
        for m in result.asset_materializations_for_node(node)
    }


def land_ids(pull, per_day: dict[date, dict[str, list[int]]]) -> Landed:
    """Lands the given ids per day and connection, as a stream's landing would."""
    landed = Landed()
    for day in pull.days:
        for connection, ids in per_day.get(day, {}).items():
            rows = [{"id": i, "connection": connection} for i in ids]
            landed.landed_day(day, connection, pull.lake.write(pull.stream, connection, rows, day))
            landed.rows_per_connection[connection] = landed.rows_per_connection.get(
                connection, 0
            ) + len(ids)
    return landed


def test_each_day_of_a_range_run_records_its_own_rows_not_the_range(tmp_path):
    first = date(2026, 10, 1)
    days = [first + timedelta(days=n) for n in range(3)]
    per_day = {days[0]: {"a": [1, 2, 3], "b": [4]}, days[1]: {"a": [5]}, days[2]: {"a": []}}
    seen = []

    def land(pull):
        seen.append((pull.service.name, pull.days))
        return land_ids(pull, per_day)

    result = materialize(tmp_path, StreamAsset(THINGS, land, "Things by day."), days[0], days[2])

    assert result.success
    assert seen == [("settings", days)]
    metadata = day_metadata(result, "test__things")
    assert {day: figures["rows"] for day, figures in metadata.items()} == {
        "2026-10-01": 4,
        "2026-10-02": 1,
        "2026-10-03": 0,
    }
    assert metadata["2026-10-01"] == {
        "rows": 4,
        "rows_per_connection": {"a": 3, "b": 1},
        "outcome": "landed",
        "run_days": "2026-10-01 to 2026-10-03 (3 days)",
        "dagster/partition_row_count": 4,
    }


def test_a_day_the_service_no_longer_serves_is_not_asked_for_and_says_so(tmp_path):
    last = today()
    old = last - timedelta(days=4)
    # Landed while the service still served it: the run must keep it, not empty it.
    Lake(tmp_path).write(RECENT, "a", [{"id": 7, "connection": "a"}], day=old)
    asked = []

    def land(pull):
        asked.append(pull.days)
        return land_ids(pull, {last: {"a": [1, 2]}})

    result = materialize(tmp_path, StreamAsset(RECENT, land, "Recent things."), old, last)

    assert result.success
    assert asked == [[last - timedelta(days=n) for n in (2, 1, 0)]]
    metadata = day_metadata(result, "test__recent")
    assert len(metadata) == 5
    assert metadata[old.isoformat()]["outcome"].startswith("not served")
    assert metadata[old.isoformat()]["rows"] == 1
    assert metadata[(old + timedelta(days=1)).isoformat()]["outcome"].startswith("not served")
    assert metadata[last.isoformat()]["rows"] == 2


def test_a_range_wholly_out_of_service_succeeds_without_asking(tmp_path):
    old = today() - timedelta(days=10)

    def land(pull):
        raise AssertionError("nothing should be asked of the service")

    result = materialize(tmp_path, StreamAsset(RECENT, land, "Recent things."), old, old)

    assert result.success
    (figures,) = day_metadata(result, "test__recent").values()
    assert figures["outcome"].startswith("not served") and figures["rows"] == 0


def test_a_refused_landing_fails_the_run_with_its_message_and_figures(tmp_path):
    def land(pull):
        raise Refused("things for 2026-10-01 cannot be pulled: not served", {"days": 1})

    day = date(2026, 10, 1)
    result = materialize(tmp_path, StreamAsset(THINGS, land, "Things by day."), day, day)

    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    assert error.cls_name == "Failure"
    assert "cannot be pulled: not served" in error.message
    assert failure.step_failure_data.user_failure_data.metadata["days"].value == 1


def test_the_catalog_shows_the_columns_with_their_descriptions_the_service_and_the_rows(
    tmp_path,
):
    def land(pull):
        rows = [{"id": 1, "connection": "a"}, {"id": 2, "connection": "a"}]
        return Landed(rows_per_connection={"a": pull.lake.write(pull.stream, "a", rows)})

    asset = stream_asset(StreamAsset(LABELS, land, "Labels."))
    spec = asset.specs_by_key[asset.key]
    columns = spec.metadata["dagster/column_schema"].columns
    assert [(c.name, c.type, c.description) for c in columns] == [
        (
            "connection",
            "string",
            LABELS.schema.field("connection").metadata[b"description"].decode(),
        ),
        ("id", "int64", "The label's id."),
        ("_extra", "string", EXTRA.metadata[b"description"].decode()),
    ]
    assert spec.metadata["dagster/table_name"] == "test.labels"
    assert spec.tags["service"] == "test"
    result = dg.materialize(
        [asset],
        resources={"lake": LakeResource(lake_root=str(tmp_path)), "test": Settings()},
    )
    (materialization,) = result.asset_materializations_for_node("test__labels")
    assert materialization.metadata["dagster/row_count"].value == 2
    # The descriptions are the catalog's, not the files': the lake is written without them.
    assert pq.read_schema(Lake(tmp_path).path(LABELS, "a")).field("id").metadata is None
