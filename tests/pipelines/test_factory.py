"""The asset factory (assets/factory.py) on a stream of its own: what the landing returns is
the materialization's metadata, and a refusal fails the run with its message, no traceback."""

from datetime import date

import dagster as dg
import pyarrow as pa

from assets.factory import StreamAsset, stream_asset
from assets.resources import LakeResource
from pipelines.lake import connection_stream
from pipelines.landing import Landed, Refused

THINGS = connection_stream("test", "things", [("id", pa.int64())], daily=True)


class Settings(dg.ConfigurableResource):
    """Stands for the service's resource, which the factory hands to the landing."""

    name: str = "settings"


def materialize(tmp_path, declared: StreamAsset) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [stream_asset(declared)],
        resources={"lake": LakeResource(lake_root=str(tmp_path)), "test": Settings()},
        partition_key="2026-10-01",
        raise_on_error=False,
    )


def test_a_partitioned_stream_lands_its_days_and_reports_what_it_landed(tmp_path):
    seen = []

    def land(pull):
        seen.append((pull.service.name, pull.stream, pull.days, str(pull.lake.root)))
        return Landed(rows_per_connection={"a": 3, "b": 1}, figures={"failed_accounts": []})

    result = materialize(tmp_path, StreamAsset(THINGS, land, "Things by day."))

    assert result.success
    assert seen == [("settings", THINGS, [date(2026, 10, 1)], str(tmp_path))]
    (materialization,) = result.asset_materializations_for_node("test__things")
    metadata = {name: value.value for name, value in materialization.metadata.items()}
    assert metadata == {
        "rows": 4,
        "rows_per_connection": {"a": 3, "b": 1},
        "days": 1,
        "unchanged_days": 0,
        "first_day": "2026-10-01",
        "last_day": "2026-10-01",
        "requests": 0,
        "429s": 0,
        "retries": 0,
        "failed_accounts": [],
    }


def test_a_refused_landing_fails_the_run_with_its_message_and_figures(tmp_path):
    def land(pull):
        raise Refused("things for 2026-10-01 cannot be pulled: not served", {"days": 1})

    result = materialize(tmp_path, StreamAsset(THINGS, land, "Things by day."))

    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    assert error.cls_name == "Failure"
    assert "cannot be pulled: not served" in error.message
    assert failure.step_failure_data.user_failure_data.metadata["days"].value == 1
