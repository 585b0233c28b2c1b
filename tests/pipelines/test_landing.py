"""The core's landing loop (pipelines/landing.py), without Dagster and without a service: the
row functions here never call their transport."""

from datetime import date
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.clients.base import Connection, Service
from pipelines.lake import Lake
from pipelines.landing import land_days, land_snapshot
from pipelines.stream import connection_stream

DAILY = connection_stream("test", "daily", [("id", pa.int64())], daily=True)
SNAPSHOT = connection_stream("test", "snapshot", [("id", pa.int64())])
DAYS = [date(2026, 10, 1), date(2026, 10, 2), date(2026, 10, 3)]


class ServiceUnderTest(Service):
    service: ClassVar[str] = "test"


def service(*names: str) -> Service:
    return ServiceUnderTest(
        connections=[
            Connection(name=n, base_url="http://127.0.0.1:9/v1", api_key="k") for n in names
        ]
    )


def ids(lake: Lake, stream, connection: str, day: date | None = None) -> list[int]:
    return pq.read_table(lake.path(stream, connection, day)).column("id").to_pylist()


def test_each_day_is_replaced_whole_unchanged_days_stay_and_missing_days_land_empty(tmp_path):
    lake = Lake(tmp_path)
    lake.write(DAILY, "a", [{"id": 0, "connection": "a"}], day=DAYS[1])
    lines = []

    def rows_by_day(transport, connection, days):
        yield DAYS[0], [{"id": 1}, {"id": 2}]
        yield DAYS[1], None  # nothing new: the landed file stays
        yield date(2026, 9, 30), [{"id": 9}]  # not asked for: ignored

    landed = land_days(service("a"), lake, DAILY, DAYS, rows_by_day, lines.append)

    assert landed.rows_per_connection == {"a": 2}
    assert landed.unchanged_days == 1
    assert ids(lake, DAILY, "a", DAYS[0]) == [1, 2]
    assert ids(lake, DAILY, "a", DAYS[1]) == [0]
    assert ids(lake, DAILY, "a", DAYS[2]) == []  # "pulled, nothing there" is state too
    assert lake.days(DAILY, "a") == DAYS
    assert lines == ["test.daily [a]: 2 rows over 3 day(s)"]


def test_a_snapshot_lands_each_connection_with_its_name_in_every_row(tmp_path):
    lake = Lake(tmp_path)

    def rows_of(transport, connection):
        count = 2 if connection.name == "a" else 1
        return [{"id": n} for n in range(count)]

    landed = land_snapshot(service("a", "b"), lake, SNAPSHOT, rows_of, lambda line: None)

    assert (landed.rows, landed.rows_per_connection) == (3, {"a": 2, "b": 1})
    table = pq.read_table(lake.path(SNAPSHOT, "b"))
    assert table.to_pylist() == [{"connection": "b", "id": 0, "_extra": None}]
    assert landed.stats.requests == 0
