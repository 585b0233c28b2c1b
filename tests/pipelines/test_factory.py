"""The asset factory (assets/factory.py) on streams of its own: each day of a range run
records its own figures, days the service no longer serves are not asked for and say so,
a connection's refusal fails the run with its message, no traceback, after the other
connection's rows are recorded, a range run shows each check's result on each of its days,
none left planned, and the catalog shows each asset's columns, service, rows and
description."""

from datetime import date, timedelta
from typing import ClassVar

import dagster as dg
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster._core.storage.asset_check_execution_record import (
    AssetCheckExecutionRecordStatus,
    AssetCheckExecutionResolvedStatus,
)
from dagster._core.storage.asset_check_state import AssetCheckState, bulk_update_asset_check_state

from assets.checks import stream_checks
from assets.factory import STARTED_BY_TAG, started_by, stream_asset
from assets.health import HEALTH
from assets.partitions import daily
from assets.resources import ConnectionConfig, LakeResource
from assets.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pipelines.clients.base import Service
from pipelines.errors import ServiceRefused
from pipelines.lake import Lake
from pipelines.lake.run_history import RUNS
from pipelines.pull.landing import PulledStream, Turn, today
from pipelines.stream import EXTRA, connection_schema, described
from pipelines.warehouse.relations import warehouse_of

SCHEMA = connection_schema([("id", pa.int64())])


class Settings(dg.ConfigurableResource, Service):
    """Stands for the service's resource, which the factory hands to the landing: two
    connections, whose transports the row functions here never call."""

    service: ClassVar[str] = "test"
    connections: list[ConnectionConfig]


def resources(tmp_path) -> dict:
    connections = [
        ConnectionConfig(name=name, base_url="http://127.0.0.1:9/v1", api_key="k")
        for name in ("a", "b")
    ]
    return {
        "lake": LakeResource(lake_root=str(tmp_path)),
        "test": Settings(connections=connections),
    }


def materialize(tmp_path, stream: PulledStream, first: date, last: date, checks=(), instance=None):
    return dg.materialize(
        [stream_asset(stream), *checks],
        resources=resources(tmp_path),
        instance=instance,
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


def test_each_day_of_a_range_run_records_its_own_rows_not_the_range(tmp_path):
    first = date(2026, 10, 1)
    days = [first + timedelta(days=n) for n in range(3)]
    per_day = {days[0]: {"a": [1, 2, 3], "b": [4]}, days[1]: {"a": [5]}, days[2]: {"a": []}}
    seen = []

    def rows(turn: Turn):
        seen.append((turn.connection.name, turn.days))
        for day in turn.days:
            yield day, [{"id": i} for i in per_day[day].get(turn.connection.name, [])]

    things = PulledStream("test", "things", SCHEMA, daily=True, rows=rows)
    result = materialize(tmp_path, things, days[0], days[2])

    assert result.success
    assert sorted(seen) == [("a", days), ("b", days)]
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


#: A stream whose service answers for the last 3 days only.
def recent(rows) -> PulledStream:
    return PulledStream("test", "recent", SCHEMA, daily=True, served_days=3, rows=rows)


def test_a_day_the_service_no_longer_serves_is_not_asked_for_and_says_so(tmp_path):
    last = today()
    old = last - timedelta(days=4)
    asked = []

    def rows(turn: Turn):
        asked.append(turn.days)
        if turn.connection.name == "a":
            yield last, [{"id": 1}, {"id": 2}]

    stream = recent(rows)
    # Landed while the service still served it: the run must keep it, not empty it.
    Lake(tmp_path).write(stream, "a", [{"id": 7, "connection": "a"}], day=old)
    result = materialize(tmp_path, stream, old, last)

    assert result.success
    assert asked == [[last - timedelta(days=n) for n in (2, 1, 0)]] * 2
    metadata = day_metadata(result, "test__recent")
    assert len(metadata) == 5
    assert metadata[old.isoformat()]["outcome"].startswith("not served")
    assert metadata[old.isoformat()]["rows"] == 1
    assert metadata[(old + timedelta(days=1)).isoformat()]["outcome"].startswith("not served")
    assert metadata[last.isoformat()]["rows"] == 2


def test_a_range_wholly_out_of_service_succeeds_without_asking(tmp_path):
    old = today() - timedelta(days=10)

    def rows(turn: Turn):
        raise AssertionError("nothing should be asked of the service")

    result = materialize(tmp_path, recent(rows), old, old)

    assert result.success
    (figures,) = day_metadata(result, "test__recent").values()
    assert figures["outcome"].startswith("not served") and figures["rows"] == 0


def test_a_refusing_connection_fails_the_run_with_its_message_after_the_other_lands(tmp_path):
    day = date(2026, 10, 1)

    def rows(turn: Turn):
        if turn.connection.name == "b":
            raise ServiceRefused("things for 2026-10-01 cannot be pulled: not served")
        yield day, [{"id": 1}]

    result = materialize(
        tmp_path, PulledStream("test", "things", SCHEMA, daily=True, rows=rows), day, day
    )

    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    assert error.cls_name == "Failure"
    assert "1 connection(s) failed (the others landed: a)" in error.message
    assert "connection 'b' (http://127.0.0.1:9/v1): things for 2026-10-01 cannot be pulled" in (
        error.message
    )
    assert "Traceback" not in error.message
    assert failure.step_failure_data.user_failure_data.metadata["rows"].value == 1
    # The run's history says the same, with the run's own figures.
    history = Lake(tmp_path).relation(RUNS)
    [(relation, outcome, rows, error)] = duckdb.sql(
        f"SELECT relation, outcome, rows, error FROM {history}"
    ).fetchall()
    assert (relation, outcome, rows) == ("test.things", "partly failed", 1)
    assert "things for 2026-10-01 cannot be pulled" in error


def test_each_connections_last_landing_and_last_failure_are_in_the_warehouse(tmp_path):
    """`sync.runs` keeps each connection's part of a run, and `sync.connection_health` says
    per connection when it last landed, when it last failed and why, and whether it has
    failed since it last landed."""
    day = date(2026, 10, 1)
    refusing = {"b"}

    def rows(turn: Turn):
        if turn.connection.name in refusing:
            raise ServiceRefused("things cannot be pulled: access denied")
        yield day, [{"id": 1}, {"id": 2}]

    stream = PulledStream("test", "things", SCHEMA, daily=True, rows=rows)

    def health() -> dict:
        warehouse_of(str(tmp_path), tmp_path / "warehouse.duckdb", ()).refresh()
        with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
            found = con.execute(
                "SELECT connection, last_landed_at IS NOT NULL, last_landed_rows, "
                "last_failed_at IS NOT NULL, last_error, failing, runs "
                "FROM sync.connection_health WHERE relation = 'test.things'"
            ).fetchall()
        return {row[0]: row[1:] for row in found}

    assert not materialize(tmp_path, stream, day, day).success
    revoked = "connection 'b' (http://127.0.0.1:9/v1): things cannot be pulled: access denied"
    first = health()
    assert first["a"] == (True, 2, False, None, False, 1)
    assert first["b"][:3] == (False, None, True) and first["b"][4:] == (True, 1)
    assert revoked in first["b"][3]
    refusing.clear()
    assert materialize(tmp_path, stream, day, day).success
    second = health()
    assert second["a"] == (True, 2, False, None, False, 2)
    assert second["b"][:3] == (True, 2, True) and second["b"][4:] == (False, 2)
    assert revoked in second["b"][3]  # the last error stays, with when it happened


def test_each_connections_health_is_carried_from_run_to_run_on_the_asset(tmp_path):
    """On a kept instance, each landing's observation of the asset holds a table of its
    connections: when each last landed, when it last failed and why, and whether it is
    failing now, carried forward from the run before."""
    day = date(2026, 10, 1)
    refusing = {"b"}

    def rows(turn: Turn):
        if turn.connection.name in refusing:
            raise ServiceRefused("things cannot be pulled: access denied")
        yield day, [{"id": 1}]

    stream = PulledStream("test", "things", SCHEMA, daily=True, rows=rows)

    key = dg.AssetKey(["test", "things"])

    def health(instance: dg.DagsterInstance) -> dict[str, dict]:
        """The newest table of the asset's connections, as the UI shows it."""
        for record in instance.fetch_observations(key, limit=5).records:
            table = record.event_log_entry.asset_observation.metadata.get(HEALTH)
            if table is not None:
                return {row.data["connection"]: row.data for row in table.records}
        raise AssertionError("no observation holds the connections' health")

    with dg.DagsterInstance.ephemeral() as instance:
        assert not materialize(tmp_path, stream, day, day, instance=instance).success
        first = health(instance)
        # What the other connection landed is recorded, though the step failed.
        [landed] = instance.fetch_materializations(key, limit=1).records
        assert landed.event_log_entry.asset_materialization.partition == day.isoformat()
        refusing.clear()
        assert materialize(tmp_path, stream, day, day, instance=instance).success
        second = health(instance)
    assert first["a"]["failing"] is False and first["a"]["last_landed_rows"] == 1
    assert first["a"]["last_failed_at"] is None and first["a"]["last_error"] is None
    assert first["b"]["failing"] is True and first["b"]["last_landed_at"] is None
    assert "access denied" in first["b"]["last_error"]
    assert second["b"]["failing"] is False and second["b"]["last_landed_rows"] == 1
    # The failure of the run before stays, with when it happened.
    assert second["b"]["last_failed_at"] == first["b"]["last_failed_at"]
    assert "access denied" in second["b"]["last_error"]
    assert second["a"]["last_landed_at"] > first["a"]["last_landed_at"]


def shown_per_day(instance: dg.DagsterInstance, key: dg.AssetCheckKey) -> dict:
    """Each status the UI shows of a check's days, with its days: Dagster's own reading of
    what it recorded (the asset's partition bar of the check, `AssetCheckState`)."""
    [state] = bulk_update_asset_check_state(
        instance, [(key, daily)], {key: AssetCheckState.empty()}
    ).values()
    return {
        status: sorted(subset.subset_value.get_partition_keys())
        for status, subset in state.subsets.items()
        if not subset.is_empty
    }


@pytest.mark.parametrize(
    ("refused", "recorded", "shown"),
    [
        (
            False,
            AssetCheckExecutionRecordStatus.SUCCEEDED,
            AssetCheckExecutionResolvedStatus.SUCCEEDED,
        ),
        # The checks do not run: each day's planned evaluation is the UI's "Execution
        # failed" of the run.
        (
            True,
            AssetCheckExecutionRecordStatus.PLANNED,
            AssetCheckExecutionResolvedStatus.EXECUTION_FAILED,
        ),
    ],
)
def test_a_range_run_shows_each_checks_result_on_each_of_its_days(
    tmp_path, refused, recorded, shown
):
    first = date(2026, 10, 1)
    days = [(first + timedelta(days=n)).isoformat() for n in range(5)]

    def rows(turn: Turn):
        if refused:
            raise ServiceRefused("not served")
        for day in turn.days:
            yield day, [{"id": day.day}]

    things = PulledStream("test", "things", SCHEMA, daily=True, rows=rows)
    checks = stream_checks([things])
    with dg.instance_for_test() as instance:
        result = materialize(
            tmp_path, things, first, first + timedelta(days=4), checks=checks, instance=instance
        )
        keys = [key for check in checks for key in check.check_keys]
        history = {
            key.name: instance.event_log_storage.get_asset_check_execution_history(key, limit=100)
            for key in keys
        }
        per_day = {key.name: shown_per_day(instance, key) for key in keys}
    assert result.success is not refused
    assert len(history) == 3
    for name, records in history.items():
        # One record per check and day of the run: its result, or the run's failure.
        assert sorted((r.run_id, r.status, r.partition) for r in records) == [
            (result.run_id, recorded, day) for day in days
        ], name
        assert per_day[name] == {shown: days}, name
    if not refused:
        # The one evaluation over the range, on each day: what it looked at says so.
        for records in history.values():
            scopes = {r.evaluation.metadata["scope"].value for r in records}
            assert scopes == {f"days {days[0]} to {days[-1]}"}


def test_a_range_run_on_a_throwaway_instance_records_each_check_once(tmp_path):
    """The command line's instance without DAGSTER_HOME is thrown away at the end of its run:
    no UI shows its days, so each check records its one result, without a day."""
    first = date(2026, 10, 1)

    def rows(turn: Turn):
        for day in turn.days:
            yield day, [{"id": day.day}]

    things = PulledStream("test", "things", SCHEMA, daily=True, rows=rows)
    checks = stream_checks([things])
    with dg.DagsterInstance.ephemeral() as instance:
        result = materialize(
            tmp_path, things, first, first + timedelta(days=4), checks=checks, instance=instance
        )
    evaluations = [
        event.asset_check_evaluation_data
        for event in result.all_events
        if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ]
    assert result.success
    assert sorted((e.check_name, e.partition, e.passed) for e in evaluations) == sorted(
        (key.name, None, True) for check in checks for key in check.check_keys
    )
    assert {e.metadata["scope"].value for e in evaluations} == {"days 2026-10-01 to 2026-10-05"}


def test_a_run_of_one_day_shows_each_checks_result_on_that_day(tmp_path):
    day = date(2026, 10, 1)

    def rows(turn: Turn):
        yield day, [{"id": 1}]

    things = PulledStream("test", "things", SCHEMA, daily=True, rows=rows)
    checks = stream_checks([things])
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [stream_asset(things), *checks],
            resources=resources(tmp_path),
            instance=instance,
            partition_key=day.isoformat(),
        )
        keys = [key for check in checks for key in check.check_keys]
        history = {
            key.name: instance.event_log_storage.get_asset_check_execution_history(key, limit=100)
            for key in keys
        }
        per_day = {key.name: shown_per_day(instance, key) for key in keys}
    assert result.success
    succeeded = AssetCheckExecutionRecordStatus.SUCCEEDED
    assert {
        name: [(r.status, r.partition) for r in records] for name, records in history.items()
    } == {key.name: [(succeeded, day.isoformat())] for key in keys}
    shown = AssetCheckExecutionResolvedStatus.SUCCEEDED
    assert per_day == {key.name: {shown: [day.isoformat()]} for key in keys}


@pytest.mark.parametrize(
    ("tags", "said"),
    [
        ({"dagster/schedule_name": "hourly_streams"}, "schedule hourly_streams"),
        ({"dagster/sensor_name": "webhooks"}, "sensor webhooks"),
        ({"dagster/backfill": "abc"}, "backfill abc"),
        ({"dagster/from_automation_condition": "true"}, "automation"),
        ({STARTED_BY_TAG: "command line"}, "command line"),
        ({}, "UI or API"),
    ],
)
def test_a_run_says_what_started_it(tags, said):
    assert started_by(tags) == said


def test_the_catalog_shows_the_columns_with_their_descriptions_the_service_and_the_rows(
    tmp_path,
):
    def rows(turn: Turn):
        return [{"id": 1}, {"id": 2}] if turn.connection.name == "a" else []

    labels = PulledStream(
        "test",
        "labels",
        connection_schema([described("id", pa.int64(), "The label's id.")]),
        rows=rows,
        description="Labels.",
    )
    asset = stream_asset(labels)
    spec = asset.specs_by_key[asset.key]
    columns = spec.metadata["dagster/column_schema"].columns
    assert [(c.name, c.type, c.description) for c in columns] == [
        (
            "connection",
            "string",
            labels.schema.field("connection").metadata[b"description"].decode(),
        ),
        ("id", "int64", "The label's id."),
        ("_extra", "string", EXTRA.metadata[b"description"].decode()),
    ]
    assert spec.metadata["dagster/table_name"] == "test.labels"
    assert spec.description == "Labels."
    assert spec.tags["service"] == "test"
    result = dg.materialize(
        [asset],
        resources=resources(tmp_path),
    )
    (materialization,) = result.asset_materializations_for_node("test__labels")
    assert materialization.metadata["dagster/row_count"].value == 2
    # The descriptions are the catalog's, not the files': the lake is written without them.
    assert pq.read_schema(Lake(tmp_path).path(labels, "a")).field("id").metadata is None
