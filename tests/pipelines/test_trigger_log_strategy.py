"""The trigger logs' incremental strategy (`pipelines/streams/comment/trigger_logs.py`) on its
own: against the sandbox, with a lake in a temporary folder and no Dagster."""

import math
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.clients.base import Connection
from pipelines.clients.comment import LOGS_PAGE_LIMIT, CommentAutomation, CommentClient
from pipelines.lake import Lake
from pipelines.pull.landing import Pull, Turn
from pipelines.pull.outcome import Landed
from pipelines.streams.comment import TRIGGER_LOGS
from pipelines.streams.comment.served import OutsideServedWindow
from pipelines.streams.comment.trigger_logs import trigger_log_days
from pipelines.transport import CallStats
from tests.pipelines.conftest import COMMENT_KEY, LiveSandbox

#: Days pulled: enough logs for several pages, so a pull that reads one page stands out.
RANGE_DAYS = 30


@dataclass
class Pulled:
    requests: int
    #: What the strategy logged: which way it took.
    said: list[str] = field(default_factory=list)
    #: Each day it yielded: rows landed, or None for "the landed file holds them".
    yielded: dict[date, int | None] = field(default_factory=dict)


class Puller:
    """Runs the strategy for some days of one sandbox's workspace and lands what it yields
    as the landing of a daily stream (`pipelines/pull/landing.py`) does: each yielded day
    replaced, None kept, a day not yielded written empty. The service's day is the sandbox
    clock's."""

    def __init__(self, sandbox: LiveSandbox, lake: Lake) -> None:
        self.clock = sandbox.app.sandbox.clock
        self.lake = lake
        self.connection = Connection(
            name="default", base_url=f"{sandbox.url}/comment/api/v1", api_key=COMMENT_KEY
        )
        self.service = CommentAutomation(connections=[self.connection], pace=False)

    def recent_days(self, count: int) -> list[date]:
        today = self.clock.today()
        return [today - timedelta(days=n) for n in range(count - 1, -1, -1)]

    def __call__(self, days: list[date]) -> Pulled:
        stats = CallStats()
        pulled = Pulled(requests=0)
        name = self.connection.name
        pull = Pull(
            self.service,
            self.lake,
            TRIGGER_LOGS,
            pulled.said.append,
            print,
            days,
            clock=self.clock.today,
        )
        with self.service.transport(self.connection, stats) as transport:
            for day, logs in trigger_log_days(Turn(pull, self.connection, transport, Landed())):
                if logs is None:
                    pulled.yielded[day] = None
                    continue
                with_connection = (
                    table.append_column("connection", pa.repeat(pa.scalar(name), table.num_rows))
                    for table in logs
                )
                pulled.yielded[day] = self.lake.write(TRIGGER_LOGS, name, with_connection, day=day)
        for day in set(days) - pulled.yielded.keys():
            self.lake.write(TRIGGER_LOGS, name, [], day=day)
        pulled.requests = stats.requests
        return pulled

    def ids(self, day: date) -> list[str]:
        """The landed ids of a day, in the file's order (the service's: newest first)."""
        path = self.lake.path(TRIGGER_LOGS, self.connection.name, day)
        return pq.read_table(path, columns=["id"])["id"].to_pylist()


def test_nothing_new_at_the_head_costs_one_page(frozen_sandbox, tmp_path):
    pull = Puller(frozen_sandbox, Lake(tmp_path))
    days = pull.recent_days(RANGE_DAYS)
    first = pull(days)
    assert sum(first.yielded.values()) > 0
    landed = {day: pull.ids(day) for day in days}

    again = pull(days)
    assert again.requests == 1
    assert again.yielded == {day: None for day in days}
    assert again.said == ["comment.trigger_logs [default]: nothing new since the last pull"]
    assert {day: pull.ids(day) for day in days} == landed


def test_new_logs_merge_into_the_landed_head_day(start_sandbox, tmp_path):
    """Logs that arrive after a pull cost only the first page (fewer than a page of them,
    where a whole pull of the range reads several), go before the head day's landed logs,
    and leave the lake as a whole pull would."""
    per_minute, arrivals = 2, 40
    # Anchored at noon, so the arrivals (20 minutes of the service's time) stay on its day.
    noon = datetime.combine(datetime.now(UTC).date(), time(12), UTC)
    sandbox = start_sandbox(frozen=False, now=noon, arrivals_per_minute=per_minute)
    clock = sandbox.app.sandbox.clock
    pull = Puller(sandbox, Lake(tmp_path / "lake"))
    days = pull.recent_days(RANGE_DAYS)
    today = days[-1]
    pull(days)
    landed = pull.ids(today)
    # Just past an arrival: the next one is 30 s of wall time away, after the pulls below.
    due = int(clock.elapsed() * per_minute / 60) + arrivals
    clock.advance(due * 60 / per_minute + 1 - clock.elapsed())

    merged = pull(days)
    assert merged.requests == 1
    [said] = merged.said
    assert said.endswith("new since the last pull")
    assert all(merged.yielded[day] is None for day in days[:-1])
    head = pull.ids(today)
    new = head[: len(head) - len(landed)]
    assert new and head[len(new) :] == landed
    assert not set(new) & set(landed)
    assert said == f"comment.trigger_logs [default]: {len(new)} new since the last pull"

    whole = Puller(sandbox, Lake(tmp_path / "whole"))
    assert whole(days).requests > 1
    assert {day: pull.ids(day) for day in days} == {day: whole.ids(day) for day in days}
    # The merged lake's fingerprint is the service's: the next pull knows from one page.
    assert pull(days).requests == 1


def test_a_changed_fingerprint_re_pages_the_day(frozen_sandbox, tmp_path):
    """A lake that lost the range's oldest log (rows one short, the newest id the same) does
    not hold the service's head plus new logs: the range is paged again, each day whole."""
    pull = Puller(frozen_sandbox, Lake(tmp_path))
    days = pull.recent_days(RANGE_DAYS)
    pull(days)
    landed = {day: pull.ids(day) for day in days}
    path = pull.lake.path(TRIGGER_LOGS, "default", days[0])
    whole = pq.read_table(path)
    assert whole.num_rows > 1
    pq.write_table(whole.slice(0, whole.num_rows - 1), path)

    again = pull(days)
    assert again.said == []  # neither "nothing new" nor a merge
    pages = math.ceil(sum(len(ids) for ids in landed.values()) / LOGS_PAGE_LIMIT)
    assert pages > 1 and again.requests >= pages
    assert again.yielded[days[0]] == whole.num_rows
    assert {day: pull.ids(day) for day in days} == landed


def test_days_outside_the_served_window_are_not_asked_for(start_sandbox, tmp_path, monkeypatch):
    asked: list[dict] = []
    totals: list[int] = []
    original, original_body = CommentClient.log_table, CommentClient.log_body

    def recording(self, **params):
        asked.append(params)
        answer = original(self, **params)
        totals.append(answer.total)
        return answer

    def recording_body(self, **params):  # the walk's pages, read together later
        asked.append(params)
        return original_body(self, **params)

    monkeypatch.setattr(CommentClient, "log_table", recording)
    monkeypatch.setattr(CommentClient, "log_body", recording_body)
    sandbox = start_sandbox(history_days=365)  # old days that hold logs
    pull = Puller(sandbox, Lake(tmp_path))
    today = sandbox.app.sandbox.clock.today()

    # The service serves today and the 364 days before it: a day before those is refused
    # before anything is asked.
    with pytest.raises(OutsideServedWindow, match="serves the last 365 days"):
        pull([today - timedelta(days=365)])
    assert asked == []

    first, last = today - timedelta(days=300), today - timedelta(days=200)
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    backfill = pull(days)
    # Every request reaches back to the range's first day, no further.
    assert {params["days"] for params in asked} == {301}
    assert backfill.yielded and set(backfill.yielded) <= set(days)
    # The newer pages are skipped by a binary search, not read: one first page, the
    # search, then the range's own pages (and one more where it starts mid-page).
    rows = sum(backfill.yielded.values())
    pages = math.ceil(totals[0] / LOGS_PAGE_LIMIT)
    assert len(asked) <= 1 + math.ceil(math.log2(pages)) + math.ceil(rows / LOGS_PAGE_LIMIT) + 1
