"""The checks every stream shares, on a lake written by hand, and the comment service's
count of its closed days against a list that moves."""

from datetime import UTC, date, datetime, time, timedelta

import dagster as dg
import pyarrow as pa
import pytest

from assets.checks import unique_ids_check
from assets.resources import LakeResource
from pipelines.clients.comment import LogTable
from pipelines.lake import Lake
from pipelines.stream import TIMESTAMP, Stream, connection_schema
from pipelines.streams.comment.checks import closed_log_total

EVENTS = Stream("test", "events", connection_schema([("id", pa.string())]), daily=True, key=("id",))


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
    result = check(dg.build_asset_check_context(), lake=LakeResource(lake_root=str(tmp_path)))
    assert result.passed is (repeated == 0)
    assert result.metadata["repeated"].value == 2 * repeated


class MovingLogList:
    """The service's newest-first list of trigger logs, `arriving` new ones of today at its
    head before each answer, as a live service does between two requests."""

    def __init__(self, of_today: int, closed: int, arriving: int) -> None:
        self.today = date(2026, 1, 2)
        noon = datetime.combine(self.today, time(12), UTC)
        self.moments = [noon] * of_today + [noon - timedelta(days=1)] * closed
        self.arriving = arriving
        self.requests = 0

    def _arrive(self) -> None:
        self.requests += 1
        self.moments[:0] = [datetime.combine(self.today, time(13), UTC)] * self.arriving

    def logs(self, *, days: int, page: int, limit: int) -> dict:
        self._arrive()
        return {"total": sum(m.date() == self.today for m in self.moments)}

    def log_table(self, *, days: int, page: int, limit: int) -> LogTable:
        self._arrive()
        listed = self.moments[page * limit : (page + 1) * limit]
        return LogTable(pa.table({"created_at": pa.array(listed, TIMESTAMP)}), len(self.moments))


@pytest.mark.parametrize(
    ("of_today", "landed_today", "arriving", "requests"),
    [
        (150, 150, 3, 1),  # the usual: guessed from the lake, a few arrived since
        (400, 400, 0, 1),  # at a multiple of 200: a page size that puts it mid-page
        (0, None, 5, 2),  # today not landed: the service's own count first
        (600, 10, 5, 3),  # far more arrived than guessed: the service's count once
        (50, 300, 0, 3),  # fewer than guessed (logs vanished): the same
    ],
)
def test_closed_log_total_counts_the_closed_days_while_logs_arrive(
    of_today, landed_today, arriving, requests
):
    service = MovingLogList(of_today, closed=1234, arriving=arriving)
    total = closed_log_total(service, service.today, landed_today)
    assert total == 1234
    assert service.requests == requests


def test_closed_log_total_gives_up_on_a_list_that_outruns_every_guess():
    service = MovingLogList(0, closed=10, arriving=10_000)
    assert closed_log_total(service, service.today, landed_today=0) is None
