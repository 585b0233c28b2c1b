"""A range backfill against a service whose rows moved between days (`pipelines/pull/edges.py`):
the days beyond its edges that no longer match are landed again, or said with the sync that
lands the rest, and the relation equals the sandbox's truth after it. Healthy data, frozen or
on a moving clock, gets no such line."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

import httpx

from pipelines.lake import Lake, file_day
from pipelines.pull.landing import today
from pipelines.settings import load_settings
from pipelines.streams.comment import TRIGGER_LOGS
from pipelines.sync import run_sync
from tests.pipelines.test_comment import workspace_id
from tests.pipelines.test_live_checks import live_sandbox
from tests.pipelines.test_sync import finished, sync

STREAM = TRIGGER_LOGS.relation


def backfill(first: date, last: date) -> list[str]:
    """`sync --streams comment.trigger_logs --start first --end last` in this process: what
    it noted (the lines the command line prints after its ranges)."""
    report = run_sync([STREAM], first, last)
    assert report.ok, report.failed
    return report.notes


def move_logs(sandbox, seconds: int, start: datetime | None = None, end: datetime | None = None):
    """The sandbox's logs created in [start, end) (all without them) moved by `seconds`."""
    bounds = {k: v.isoformat() for k, v in (("start", start), ("end", end)) if v is not None}
    answer = httpx.post(
        f"{sandbox.url}/_sandbox/comment/default/logs/shift",
        params={"seconds": seconds, **bounds},
        timeout=30,
    )
    answer.raise_for_status()
    return answer.json()["moved"]


def landed_days(lake: Lake) -> dict[str, int]:
    return {
        str(file_day(path)): lake.footer(path).num_rows
        for path in lake.files(TRIGGER_LOGS)
        if path.endswith("/default.parquet")
    }


def assert_equals_truth(sandbox, first: date, last: date) -> None:
    """The relation over `first`..`last` as the service holds it: each day's rows, and every
    log once, none the service lacks."""
    lake = Lake(load_settings().lake_root)
    scope = workspace_id(sandbox)
    truth = sandbox.truth_days("comment", scope, "trigger_logs")
    days = [str(first + timedelta(days=n)) for n in range((last - first).days + 1)]
    landed = landed_days(lake)
    assert {d: landed.get(d) for d in days} == {d: truth[d] for d in days}
    [(rows, distinct)] = lake.query(
        f"SELECT count(*), count(DISTINCT id) FROM {lake.relation(TRIGGER_LOGS)}"
    )
    assert rows == distinct, "a log is in the lake twice"
    ids = {i for (i,) in lake.query(f"SELECT id FROM {lake.relation(TRIGGER_LOGS)}")}
    assert ids <= set(sandbox.truth_ids("comment", scope, "trigger_logs"))


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(), UTC)


def across(sandbox, day: date) -> int:
    """The last two hours of logs before `day`'s midnight moved three hours on, into `day`."""
    moved = move_logs(sandbox, 3 * 3600, midnight(day) - timedelta(hours=2), midnight(day))
    return moved[workspace_id(sandbox)]


def test_logs_moved_across_a_backfills_edges_are_landed_again(start_sandbox, sync_env):
    """The left edge is older than the daily stats reach (its count from the list's totals),
    the right one within them."""
    sandbox = start_sandbox()
    sync_env(sandbox)
    on = today()
    first, last = on - timedelta(days=94), on - timedelta(days=80)
    assert backfill(first, last) == []  # nothing landed beyond it yet
    start, end = on - timedelta(days=90), on - timedelta(days=89)
    assert backfill(start, end) == []  # healthy: its edges hold

    lake = Lake(load_settings().lake_root)
    before = landed_days(lake)
    left, right = start - timedelta(days=1), end + timedelta(days=1)
    out_of_left = across(sandbox, start)  # from the day before the range into it
    into_right = across(sandbox, right)  # from the range's last day out of it
    assert out_of_left and into_right

    assert backfill(start, end) == [
        f"{STREAM}: days {left} (lake {before[str(left)]}, service "
        f"{before[str(left)] - out_of_left}) and {right} (lake {before[str(right)]}, service "
        f"{before[str(right)] + into_right}) beyond {start}..{end} differed from the service: "
        "landed again"
    ]
    assert_equals_truth(sandbox, first, last)


def test_logs_moved_everywhere_are_said_with_the_sync_that_lands_the_rest(start_sandbox, sync_env):
    """Every log three hours earlier (a sandbox started again with another anchor): days
    beyond both edges differ, so nothing more is landed unasked and the one line names the
    sync of every day the lake holds; after it, the relation is the truth."""
    sandbox = start_sandbox()
    sync_env(sandbox)
    on = today()
    first = on - timedelta(days=12)
    backfill(first, on)
    assert move_logs(sandbox, -3 * 3600)[workspace_id(sandbox)]

    start, end = on - timedelta(days=5), on - timedelta(days=4)
    [said] = backfill(start, end)
    command = f"python -m cli sync --streams {STREAM} --start {first} --end {on}"
    assert said.startswith(f"{STREAM}: days ")
    assert f" beyond {start}..{end} differ from the service: " in said
    assert said.endswith(f"run `{command}`")

    # The step it names, as a user runs it: nothing more to say, and the relation is the truth.
    output = finished(sync(*re.search(r"`python -m cli sync (.*)`", said)[1].split()))
    assert "differ" not in output, output
    assert_equals_truth(sandbox, first, on)


def test_a_backfill_on_a_moving_clock_says_nothing_of_healthy_days_and_mends_moved_ones(
    start_sandbox, sync_env
):
    """Logs keep arriving between the landings and the backfills: no line on healthy days;
    logs moved across the range's right edge, its neighbour landed again; the closed days
    are the truth and today holds nothing the service lacks."""
    sandbox = live_sandbox(start_sandbox)
    sync_env(sandbox)
    clock, on = sandbox.app.sandbox.clock, today()
    first = on - timedelta(days=8)
    backfill(first, on)
    clock.advance(120)
    start, end = on - timedelta(days=5), on - timedelta(days=3)
    assert backfill(start, end) == []

    right = end + timedelta(days=1)
    landed = landed_days(Lake(load_settings().lake_root))[str(right)]
    moved = across(sandbox, right)
    assert moved
    clock.advance(120)
    assert backfill(start, end) == [
        f"{STREAM}: day {right} (lake {landed}, service {landed + moved}) beyond "
        f"{start}..{end} differed from the service: landed again"
    ]
    assert_equals_truth(sandbox, first, on - timedelta(days=1))
