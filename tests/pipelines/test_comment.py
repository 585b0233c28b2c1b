"""Comment automation pull against the sandbox: exact, idempotent, incremental, paced."""

import math
import threading
from datetime import UTC, datetime, timedelta

import dagster as dg
import duckdb
import httpx
import pytest

from assets import comment
from pipelines.clients.comment import CommentClient
from pipelines.pull.landing import today
from pipelines.streams import comment as streams
from sandbox.faults import FaultSpec
from tests.conftest import HISTORY_DAYS
from tests.figures import run_figures

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
DIMENSIONS = [a for a in comment.ASSETS.values() if a.partitions_def is None]


def materialize(resources, assets, first=None, last=None, instance=None, check=True):
    tags = {}
    if first is not None:
        tags = {RANGE_START: first.isoformat(), RANGE_END: last.isoformat()}
    keys = {a.key for a in assets}
    checks = [c for c in comment.CHECKS if {k.asset_key for k in c.check_keys} & keys]
    result = dg.materialize(
        [*assets, *checks],
        resources=resources,
        tags=tags,
        instance=instance,
        raise_on_error=check,
    )
    return result


def metadata(result, key: str) -> dict:
    """The run figures of the last asset of the run that reported `key`."""
    return next(f for f in reversed(list(run_figures(result).values())) if key in f)


def requests_made(result) -> int:
    """Requests of every asset of a run."""
    return sum(figures["requests"] for figures in run_figures(result).values())


def landed(resources, stream) -> duckdb.DuckDBPyRelation:
    relation = resources["lake"].lake().relation(stream)
    return duckdb.sql(f"SELECT * FROM {relation}")


def workspace_id(sandbox) -> str:
    answer = httpx.get(
        f"{sandbox.url}/comment/api/v1/me",
        headers={"Authorization": "Bearer sa_live_demo_readonly"},
    )
    return answer.json()["workspace"]["id"]


def full_history(resources) -> list:
    """Stats before logs, so the logs' reconciliation check has both sides."""
    last = today()
    return [
        materialize(resources, [comment.ASSETS["daily_stats"]], last - timedelta(days=89), last),
        materialize(
            resources,
            [comment.ASSETS["trigger_logs"]],
            last - timedelta(days=HISTORY_DAYS - 1),
            last,
        ),
        materialize(resources, DIMENSIONS),
    ]


def test_everything_lands_equal_to_the_truth(frozen_sandbox, sync_env):
    resources = sync_env(frozen_sandbox)
    results = full_history(resources)
    scope = workspace_id(frozen_sandbox)
    truth = frozen_sandbox.truth()["comment"][scope]
    for stream in streams.STREAMS:
        rows = landed(resources, stream)
        assert len(rows) == truth[stream.name], stream.name
        assert set(rows.fetchnumpy()["connection"]) == {"default"}
    for stream in ("trigger_logs", "activities", "accounts"):
        ids = {
            row[0]
            for row in landed(resources, getattr(streams, stream.upper())).select("id").fetchall()
        }
        assert ids == set(frozen_sandbox.truth_ids("comment", scope, stream)), stream
    checks = [e for r in results for e in r.get_asset_check_evaluations()]
    assert {e.check_name for e in checks} >= {"ids_unique", "logs_match_daily_stats"}
    assert all(e.passed for e in checks if e.check_name != "tokens_not_expiring")
    reconciled = next(e for e in checks if e.check_name == "logs_match_daily_stats")
    assert reconciled.metadata["days_compared"].value == 89  # today is still open
    # No run asked for the views: each landing made its relation queryable, and recorded
    # its run in sync.runs.
    with duckdb.connect(resources["lake"].warehouse_path, read_only=True) as warehouse:
        for stream in streams.STREAMS:
            [(count,)] = warehouse.execute(f"SELECT count(*) FROM {stream.relation}").fetchall()
            assert count == truth[stream.name], stream.relation
        runs = warehouse.execute(
            "SELECT relation, started_by, first_day, last_day, rows, requests, outcome, error, "
            "ended_at >= started_at FROM sync.runs"
        ).fetchall()
    last = today()
    daily = {
        "comment.trigger_logs": (last - timedelta(days=HISTORY_DAYS - 1), last),
        "comment.daily_stats": (last - timedelta(days=89), last),
    }
    assert sorted(run[0] for run in runs) == sorted(s.relation for s in streams.STREAMS)
    for relation, by, first, last_day, rows, requests, outcome, error, ordered in runs:
        assert (by, outcome, error, ordered) == ("UI or API", "succeeded", None, True)
        assert (first, last_day) == daily.get(relation, (None, None)), relation
        assert rows == truth[relation.split(".")[1]] and requests > 0, relation


def test_a_second_run_duplicates_nothing_and_asks_once_when_nothing_is_new(
    frozen_sandbox, sync_env
):
    resources = sync_env(frozen_sandbox)
    full_history(resources)
    before = len(landed(resources, streams.TRIGGER_LOGS))
    again = materialize(
        resources, [comment.ASSETS["trigger_logs"]], today() - timedelta(days=1), today()
    )
    assert metadata(again, "requests")["requests"] == 1
    assert metadata(again, "requests")["unchanged_days"] == 2
    full_history(resources)
    assert len(landed(resources, streams.TRIGGER_LOGS)) == before
    ids = landed(resources, streams.TRIGGER_LOGS).select("id")
    assert len(ids) == len(ids.distinct())


def test_new_logs_cost_their_pages_and_land_before_the_landed_ones(start_sandbox, sync_env):
    """After a full pull, the sync of yesterday and today reads only the pages up to the
    newest landed log (not the two days again), and the lake still equals the truth."""
    per_minute, landed_first, arrivals = 2, 1200, 450
    advance = (landed_first + arrivals) * 60 / per_minute
    # Anchored `advance` back, so after the clock is moved the service's now is the wall's.
    sandbox = start_sandbox(
        frozen=False,
        now=datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=advance),
        arrivals_per_minute=per_minute,
    )
    resources = sync_env(sandbox)
    scope = workspace_id(sandbox)
    clock = sandbox.app.sandbox.clock
    clock.advance(landed_first * 60 / per_minute)  # yesterday and today fill up
    last = today()
    # The history ends on the anchor's day: yesterday, early in a UTC day.
    first = clock.anchor.date() - timedelta(days=HISTORY_DAYS - 1)
    materialize(resources, [comment.ASSETS["trigger_logs"]], first, last)
    before = len(landed(resources, streams.TRIGGER_LOGS))
    recent = landed(resources, streams.TRIGGER_LOGS).filter(f"date >= '{last - timedelta(1)}'")
    assert len(recent) > 800  # re-reading the two days would cost 4 pages more at least
    # Just past an arrival: the next one is 30 s of wall time away, after the sync.
    due = int(clock.elapsed() * per_minute / 60) + arrivals
    clock.advance(due * 60 / per_minute + 1 - clock.elapsed())
    truth = sorted(sandbox.truth_ids("comment", scope, "trigger_logs"))
    new = len(truth) - before
    assert new > 200  # some arrivals find no running activity; enough for two pages

    result = materialize(
        resources, [comment.ASSETS["trigger_logs"]], last - timedelta(days=1), last
    )
    assert metadata(result, "requests")["requests"] == new // 200 + 1
    assert sorted(sandbox.truth_ids("comment", scope, "trigger_logs")) == truth  # none arrived
    rows = landed(resources, streams.TRIGGER_LOGS)
    assert sorted(row_id for (row_id,) in rows.select("id").fetchall()) == truth
    checks = result.get_asset_check_evaluations()
    assert all(e.passed for e in checks if e.check_name != "logs_match_daily_stats")
    # After the merge the lake's fingerprint (rows, newest id) is the service's again: the
    # next sync knows from its first page alone that nothing is new.
    again = materialize(resources, [comment.ASSETS["trigger_logs"]], last - timedelta(days=1), last)
    assert metadata(again, "requests")["requests"] == 1


def test_a_backfill_of_old_days_costs_its_rows_not_the_history(frozen_sandbox, sync_env):
    resources = sync_env(frozen_sandbox)
    first, last = today() - timedelta(days=80), today() - timedelta(days=60)
    result = materialize(resources, [comment.ASSETS["trigger_logs"]], first, last)
    rows = metadata(result, "rows")["rows"]
    pages = math.ceil(6000 / 200)
    assert rows > 0
    # one first page, a binary search over the pages, then the range's own pages
    assert (
        metadata(result, "requests")["requests"]
        <= 1 + math.ceil(math.log2(pages)) + math.ceil(rows / 200) + 1
    )
    days = {row[0] for row in landed(resources, streams.TRIGGER_LOGS).select("date").fetchall()}
    assert min(days) == first and max(days) == last


def test_a_day_older_than_the_service_keeps_is_not_asked_for_and_says_so(frozen_sandbox, sync_env):
    """Daily stats are served for 90 days, the partitions reach further back (a year by
    default): "materialize all" must not leave days that fail forever."""
    resources = sync_env(frozen_sandbox)
    old = today() - timedelta(days=HISTORY_DAYS - 2)  # older than the 90 days served
    result = materialize(resources, [comment.ASSETS["daily_stats"]], old, old + timedelta(days=1))
    assert result.success
    assert metadata(result, "requests")["requests"] == 0
    days = result.asset_materializations_for_node("comment__daily_stats")
    assert len(days) == 2
    assert all(d.metadata["outcome"].value.startswith("not served") for d in days)


def test_faults_do_not_change_the_result(start_sandbox, sync_env):
    sandbox = start_sandbox(
        faults=FaultSpec(
            error=0.1,
            rate=0.05,
            slow=0.02,
            delay=0.3,
            drop=0.05,
            truncate=0.05,
            posts_502=0.2,
            retry_after=0,
        )
    )
    resources = sync_env(sandbox)
    full_history(resources)
    truth = sandbox.truth()["comment"][workspace_id(sandbox)]
    for stream in streams.STREAMS:
        assert len(landed(resources, stream)) == truth[stream.name], stream.name
    injected = sandbox.app.sandbox.faults.injected
    assert {"rate", "drop", "truncate"} <= set(injected)  # faults really happened
    assert any(kind.startswith("error_") for kind in injected)


def test_paging_drift_loses_and_doubles_nothing(start_sandbox, sync_env, monkeypatch):
    """Rows arrive at the head and an activity's logs (the newest among them) vanish while
    the range is paged: every row that existed throughout lands once, and a landed row that
    is gone now belonged to the deleted activity."""
    sandbox = start_sandbox(frozen=False, arrivals_per_minute=600)
    resources = sync_env(sandbox)
    scope = workspace_id(sandbox)
    before = set(sandbox.truth_ids("comment", scope, "trigger_logs"))
    writer = {"Authorization": "Bearer sa_live_demo_readwrite"}
    original = CommentClient.logs
    calls = {"n": 0}
    deleted: set[str] = set()

    def shifting_logs(self, **kwargs):
        calls["n"] += 1
        if calls["n"] % 4 == 0:
            sandbox.app.sandbox.clock.advance(30)  # 300 new logs at the head
        if calls["n"] == 6:
            activity_id = original(self, days=1, page=0)["logs"][0]["activity_id"]
            deleted.add(activity_id)
            httpx.delete(
                f"{sandbox.url}/comment/api/v1/activities/{activity_id}", headers=writer
            ).raise_for_status()
        return original(self, **kwargs)

    monkeypatch.setattr(CommentClient, "logs", shifting_logs)
    materialize(
        resources,
        [comment.ASSETS["trigger_logs"]],
        today() - timedelta(days=HISTORY_DAYS - 1),
        today(),
    )
    after = set(sandbox.truth_ids("comment", scope, "trigger_logs"))
    rows = landed(resources, streams.TRIGGER_LOGS).select("id, activity_id").fetchall()
    ids = [row_id for row_id, _ in rows]
    assert len(ids) == len(set(ids)), "a row landed twice"
    assert (before & after) <= set(ids), "a row that existed throughout was lost"
    gone = {row_id for row_id, activity in rows if row_id not in after}
    assert {activity for row_id, activity in rows if row_id in gone} <= deleted


def test_steps_sharing_a_key_stay_under_its_rate_limit(start_sandbox, sync_env):
    """Five runs at once on one key make more requests than the limit allows in a window
    (120 per 10 s here); the shared pacer keeps them under it: no 429. The client is told an
    11 s window: with the service's own 10 s, a request delayed 0.12 s by a busy machine
    could land a 121st in one window, and 10 s windows are only there to keep the test short."""
    sandbox = start_sandbox(rate_limits=True, rate_window_seconds=10)
    resources = sync_env(
        sandbox, pace=True, sync_toml="[service.comment]\nrate_window_seconds = 11\n"
    )
    runs = [([comment.ASSETS["trigger_logs"]], today() - timedelta(days=HISTORY_DAYS - 1), today())]
    runs += [(DIMENSIONS,)] * 4
    results = []
    threads = [
        threading.Thread(target=lambda r=r: results.append(materialize(resources, *r)))
        for r in runs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 5 and all(r.success for r in results)
    requests = sum(requests_made(r) for r in results)
    assert requests > 120  # unpaced, these would overrun one window
    assert sandbox.app.sandbox.limiter.refused == 0
    assert all(metadata(r, "429s")["429s"] == 0 for r in results)


@pytest.mark.parametrize("stream", ["workspace", "accounts"])
def test_account_token_warning_and_workspace_fields(frozen_sandbox, sync_env, stream):
    resources = sync_env(frozen_sandbox)
    result = materialize(resources, [comment.ASSETS["workspace"], comment.ASSETS["accounts"]])
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    # the sandbox's first Instagram account expires within 7 days (sandbox/README.md)
    assert not checks["tokens_not_expiring"].passed
    assert checks["tokens_not_expiring"].severity == dg.AssetCheckSeverity.WARN
    row = landed(resources, getattr(streams, stream.upper())).fetchall()
    assert row


def test_a_platform_that_keeps_failing_reports_the_account_not_the_run(start_sandbox, sync_env):
    """Every recent-posts call answers 502: retried, then each account is reported in the
    metadata and the run (and the other streams) still succeed."""
    sandbox = start_sandbox(faults=FaultSpec(posts_502=1.0))
    resources = sync_env(sandbox, sync_toml="[service.comment]\nretry_attempts = 2\n")
    result = materialize(resources, [comment.ASSETS["accounts"], comment.ASSETS["posts"]])
    assert result.success
    posts = next(
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == comment.ASSETS["posts"].key
    )
    failed = posts.materialization.metadata["failed_accounts"].value  # per connection
    accounts = len(landed(resources, streams.ACCOUNTS))
    assert sum(len(lists) for lists in failed.values()) == accounts * 2  # posts and stories
    assert len(landed(resources, streams.POSTS)) == 0
