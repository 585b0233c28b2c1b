"""The core's landing loop (pipelines/pull/landing.py), without Dagster and without a service: the
row functions here never call their transport."""

from datetime import date
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.clients.base import Connection, Service
from pipelines.lake import Lake
from pipelines.progress import watching
from pipelines.pull.landing import Pull, PulledStream, Turn, land
from pipelines.pull.progress import TurnProgress
from pipelines.stream import connection_schema

SCHEMA = connection_schema([("id", pa.int64())])
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
    def rows_by_day(turn: Turn):
        assert turn.days == DAYS
        yield DAYS[0], [{"id": 1}, {"id": 2}]
        yield DAYS[1], None  # nothing new: the landed file stays
        yield date(2026, 9, 30), [{"id": 9}]  # not asked for: ignored

    daily = PulledStream("test", "daily", SCHEMA, daily=True, rows=rows_by_day)
    lake = Lake(tmp_path)
    lake.write(daily, "a", [{"id": 0, "connection": "a"}], day=DAYS[1])
    lines = []

    landed = land(Pull(service("a"), lake, daily, lines.append, lines.append, DAYS))

    assert landed.rows_per_connection == {"a": 2}
    assert landed.unchanged_days == 1
    assert ids(lake, daily, "a", DAYS[0]) == [1, 2]
    assert ids(lake, daily, "a", DAYS[1]) == [0]
    assert ids(lake, daily, "a", DAYS[2]) == []  # "pulled, nothing there" is state too
    assert lake.days(daily, "a") == DAYS
    assert lines == ["test.daily [a]: 2 rows over 3 day(s)"]


def test_a_snapshot_lands_each_connection_with_its_name_in_every_row(tmp_path):
    def rows_of(turn: Turn):
        count = 2 if turn.connection.name == "a" else 1
        return [{"id": n} for n in range(count)]

    snapshot = PulledStream("test", "snapshot", SCHEMA, rows=rows_of)
    lake = Lake(tmp_path)

    landed = land(Pull(service("a", "b"), lake, snapshot, print, print))

    assert (landed.rows, landed.rows_per_connection) == (3, {"a": 2, "b": 1})
    table = pq.read_table(lake.path(snapshot, "b"))
    assert table.to_pylist() == [{"connection": "b", "id": 0, "_extra": None}]
    assert landed.stats.requests == 0


def test_a_row_function_reports_figures_per_connection_and_sets_its_files_metadata(tmp_path):
    """What a row function says through its turn: a figure per connection, metadata of the
    file it lands, a warning naming the stream and the connection, and the clock it is
    given."""

    def rows_of(turn: Turn):
        turn.file_metadata["seen_through"] = turn.today().isoformat()
        turn.report("looked_up", len(turn.connection.name))
        turn.warn("one skipped")
        return [{"id": 1}]

    snapshot = PulledStream("test", "snapshot", SCHEMA, rows=rows_of)
    lake, warnings = Lake(tmp_path), []

    landed = land(
        Pull(service("a", "bb"), lake, snapshot, print, warnings.append, clock=lambda: DAYS[0])
    )

    assert landed.figures == {"looked_up": {"a": 1, "bb": 2}}
    assert lake.read_metadata(lake.path(snapshot, "bb"))["seen_through"] == "2026-10-01"
    assert sorted(warnings) == ["test.snapshot [a]: one skipped", "test.snapshot [bb]: one skipped"]


def test_a_stream_that_lands_its_own_files_records_each_day_and_a_failure_stays_its_own(
    tmp_path,
):
    """A `lands` function writes a connection's files itself; a connection whose turn raises
    is recorded as failed with its reason, and the other still lands."""

    def lands(turn: Turn) -> int:
        if turn.connection.name == "broken":
            raise RuntimeError("the file was cut")
        for day in turn.days:
            turn.lake.write(turn.stream, turn.connection.name, [{"id": 1, "connection": "a"}], day)
            turn.landed_day(day, 1)
        return len(turn.days)

    daily = PulledStream("test", "files", SCHEMA, daily=True, lands=lands)
    lake = Lake(tmp_path)

    landed = land(Pull(service("a", "broken"), lake, daily, print, print, DAYS[:2]))

    assert landed.rows_per_connection == {"a": 2}
    assert landed.per_day == {DAYS[0]: {"a": 1}, DAYS[1]: {"a": 1}}
    assert "the file was cut" in landed.failed["broken"]
    assert lake.days(daily, "a") == DAYS[:2]


def test_a_stream_declares_one_way_to_land():
    with pytest.raises(TypeError, match="either `rows` or `lands`"):
        PulledStream("test", "nothing", SCHEMA)


def test_a_watched_landing_shows_each_connections_days_rows_and_calls_as_it_goes(tmp_path):
    """The board a live display reads (`pipelines/pull/progress.py`): a turn per connection, its
    days done of the days asked and its rows as each day lands, its own calls (which the
    run's figures count too), and a failed one marked so."""
    seen = []

    def rows_by_day(turn: Turn):
        if turn.connection.name == "broken":
            raise RuntimeError("the service went away")
        for n, day in enumerate(DAYS):
            turn.transport.stats.add(requests=1, pages=1, waited=0.25)
            seen.append((turn.progress.days_done, turn.progress.rows))
            yield day, [{"id": n}] * n

    daily = PulledStream("test", "daily", SCHEMA, daily=True, rows=rows_by_day)

    with watching() as board:
        landed = land(Pull(service("a", "broken"), Lake(tmp_path), daily, print, print, DAYS))

    assert seen == [(0, 0), (1, 0), (2, 1)]  # each day counted once its file is written
    turns = {turn.connection: turn for turn in board.entries(TurnProgress)}
    a, broken = turns["a"], turns["broken"]
    assert (a.relation, a.days_done, a.days_asked, a.rows) == ("test.daily", 3, 3, 3)
    assert not a.failed
    assert (a.stats.requests, a.stats.pages, a.stats.waited) == (3, 3, 0.75)
    assert landed.stats.requests == 3 and landed.stats.waited == 0.75
    assert broken.failed and broken.days_done == 0 and broken.ended is not None
    assert a.seconds_left(a.ended) is None  # over: nothing left to tell
