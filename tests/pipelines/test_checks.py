"""The checks every stream shares, on a lake written by hand."""

from datetime import date

import dagster as dg
import pyarrow as pa
import pytest

from assets.checks import unique_ids_check
from assets.resources import LakeResource
from pipelines.lake import Lake, connection_stream

EVENTS = connection_stream("test", "events", [("id", pa.string())], daily=True, key=("id",))


@pytest.mark.parametrize(
    ("days", "repeated"),
    [
        ({date(2026, 1, 1): ["a", "b"], date(2026, 1, 2): ["c"]}, 0),
        # The same id on two days: only a check over the whole history sees it.
        ({date(2026, 1, 1): ["a", "b"], date(2026, 1, 2): ["b", "c"]}, 1),
    ],
)
def test_ids_unique_counts_a_key_repeated_across_days(tmp_path, days, repeated):
    lake = Lake(tmp_path)
    for day, ids in days.items():
        lake.write(EVENTS, "default", [{"connection": "default", "id": i} for i in ids], day=day)
        # Another connection may hold the same ids: keys are per connection.
        lake.write(EVENTS, "other", [{"connection": "other", "id": i} for i in ids], day=day)
    check = unique_ids_check(EVENTS, dg.AssetKey(["test", "events"]))
    result = check(lake=LakeResource(lake_root=str(tmp_path)))
    assert result.passed is (repeated == 0)
    assert result.metadata["repeated"].value == 2 * repeated
