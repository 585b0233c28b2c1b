"""A key's budget shared by processes (`pipelines/state/budget.py`): several processes on one key
stay under its limit as the sandbox counts it, and a `Retry-After` one of them met holds the
others too; through the SQLite file, and through Postgres (a server of its own, `pgserver`).
With the store `off` (each process paces alone) the same runs meet 429s: the tests can fail.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from datetime import UTC, datetime

import httpx
import pytest
import time_machine

from pipelines.clients.comment import REQUESTS_PER_MINUTE
from pipelines.errors import SetupError
from pipelines.settings import load_settings
from pipelines.state.budget import OFF, STORE_VARIABLE, BudgetUnavailable, open_budget
from pipelines.state.shared_store import shown
from pipelines.transport import CallStats, ServiceError, key_id, pacing
from pipelines.transport.pacing import Rate, SharedPacer

from . import budget_worker
from .budget_worker import COMMENT_KEY, WINDOW, call_me, comment_service

PROCESSES = 4
#: Per process: 4 x 35 = 140 requests, more than a window's budget, about 12 s paced.
CALLS = 35
#: Workers forked from a server that imported their module, not from this process (which
#: runs a sandbox's threads): each starts in a fraction of a second, even on a busy machine.
WORKERS = multiprocessing.get_context("forkserver")
WORKERS.set_forkserver_preload([budget_worker.__name__])


@pytest.fixture(params=["sqlite", "postgres", OFF])
def store(request, tmp_path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return OFF if request.param == OFF else str(tmp_path / "budget.sqlite3")


def start_workers(url: str, store: str | list[dict], count: int, calls: int):
    """`count` workers on the store, or each on its own settings (a list)."""
    go, results = WORKERS.Event(), WORKERS.Queue()
    workers = []
    each = store if isinstance(store, list) else [{STORE_VARIABLE: store}] * count
    for settings in each:
        ready = WORKERS.Event()
        worker = WORKERS.Process(target=call_me, args=(url, settings, calls, ready, go, results))
        worker.start()
        workers.append((worker, ready))
    for _, ready in workers:
        assert ready.wait(120), "a worker did not start"
    return go, results, [worker for worker, _ in workers]


def finish(workers, results) -> list[tuple[int, int]]:
    answers = [results.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    return answers


@pytest.fixture
def limited_sandbox(start_sandbox):
    """A sandbox enforcing the comment limit over `WINDOW` seconds."""
    return start_sandbox(rate_limits=True, rate_window_seconds=WINDOW)


def test_processes_on_one_key_share_its_budget(limited_sandbox, store):
    """Four processes, each pacing itself to the whole limit: through a shared store the
    sandbox refuses none of their 140 requests (more than a window's budget, so the limit
    binds); each pacing alone, they send four times the limit and are refused."""
    url = f"{limited_sandbox.url}/comment/api/v1"
    limiter = limited_sandbox.app.sandbox.limiter
    go, results, workers = start_workers(url, store, PROCESSES, CALLS)
    refused_before = limiter.refused
    go.set()
    answers = finish(workers, results)
    sent = sum(requests for requests, _ in answers)
    refused = limiter.refused - refused_before
    assert sent == PROCESSES * CALLS
    assert refused == sum(refusals for _, refusals in answers)
    if store == OFF:
        assert refused > 0
    else:
        assert refused == 0


def test_processes_on_one_key_share_its_budget_whatever_their_lake(limited_sandbox, tmp_path):
    """No store named: three processes with three lakes (a dev and a prod lake, say) pace
    the key through the host's one budget, and the sandbox refuses none. The default was a
    store beside each lake, and three syncs met 361 refusals."""
    url = f"{limited_sandbox.url}/comment/api/v1"
    limiter = limited_sandbox.app.sandbox.limiter
    lakes = [{"LAKE_ROOT": str(tmp_path / name / "lake")} for name in ("dev", "prod", "test")]
    go, results, workers = start_workers(url, lakes, len(lakes), CALLS)
    refused_before = limiter.refused
    go.set()
    answers = finish(workers, results)
    assert sum(requests for requests, _ in answers) == len(lakes) * CALLS
    assert limiter.refused - refused_before == 0
    assert not list(tmp_path.rglob("budget.sqlite3"))  # none beside a lake


def test_a_hold_met_by_one_process_holds_the_others(limited_sandbox, store, monkeypatch):
    """The key's window is spent; this process meets the 429 and its `Retry-After` (about
    `WINDOW` seconds); another process, asked to send right then, waits the hold out
    through the store and is not refused. Alone, it sends at once and is refused too."""
    url = f"{limited_sandbox.url}/comment/api/v1"
    limiter = limited_sandbox.app.sandbox.limiter
    go, results, workers = start_workers(url, store, 1, 1)
    with httpx.Client(headers={"Authorization": f"Bearer {COMMENT_KEY}"}) as raw:
        while raw.get(f"{url}/me").status_code != 429:  # the whole window, unpaced
            pass
    refused_before = limiter.refused
    monkeypatch.setenv(STORE_VARIABLE, store)
    service = comment_service(url)
    with (
        service.transport(service.connections[0], CallStats()) as transport,
        pytest.raises(ServiceError, match="429"),
    ):
        transport.request_json("GET", "/me")  # the hold is recorded as it is refused
    go.set()
    [(sent, refused)] = finish(workers, results)
    assert sent == 1
    assert limiter.refused - refused_before == 1 + refused
    assert refused == (1 if store == OFF else 0)


def test_the_store_holds_a_key_id_never_the_key(limited_sandbox, tmp_path):
    store = tmp_path / "budget.sqlite3"
    url = f"{limited_sandbox.url}/comment/api/v1"
    go, results, workers = start_workers(url, str(store), 1, 2)
    go.set()
    finish(workers, results)
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT key_id, bucket FROM warehouse_sync_budget").fetchall() == [
            (key_id(COMMENT_KEY, url), "default")
        ]
    for path in tmp_path.iterdir():
        assert COMMENT_KEY.encode() not in path.read_bytes(), path


def test_the_pacer_spaces_requests_through_the_store(tmp_path):
    """Consecutive reservations on one key are `interval` apart, whoever takes them; a
    hold moves the next slot past it. No sleeping: the waits are what is returned."""
    budget = open_budget(str(tmp_path / "budget.sqlite3"))
    interval = WINDOW / REQUESTS_PER_MINUTE
    waits = [budget.reserve("k", "default", interval) for _ in range(5)]
    gaps = [later - earlier for earlier, later in zip(waits, waits[1:], strict=False)]
    assert all(abs(gap - interval) < interval / 2 for gap in gaps), gaps
    budget.hold("k", "default", 30)
    assert budget.reserve("k", "default", interval) > 25
    assert budget.reserve("other", "default", interval) <= 0  # another key is not held


def test_a_wrong_store_is_said_without_its_password(tmp_path):
    url = "postgresql://sync:s3cret-pw@127.0.0.1:1/dagster"
    assert "s3cret-pw" not in shown(url)
    with pytest.raises(BudgetUnavailable) as caught:
        open_budget(url)
    assert "s3cret-pw" not in str(caught.value)
    assert STORE_VARIABLE in str(caught.value)
    (tmp_path / "sync.toml").write_text("")
    env = {"SYNC_CONFIG": str(tmp_path / "sync.toml")}
    with pytest.raises(SetupError, match=STORE_VARIABLE):
        load_settings(env | {STORE_VARIABLE: "redis://cache:6379/0"})


def test_the_default_store_is_the_hosts_whatever_the_lake(tmp_path):
    """Processes of one host share a key's budget whatever their lake; the deployment's
    `SYNC_STORE` serves where no budget store is named; `SYNC_BUDGET_STORE` wins."""
    (tmp_path / "sync.toml").write_text("")
    env = {"SYNC_CONFIG": str(tmp_path / "sync.toml"), "XDG_STATE_HOME": str(tmp_path / "s")}
    stores = {
        load_settings(env | {"LAKE_ROOT": str(tmp_path / lake / "lake")}).budget_store
        for lake in ("dev", "prod")
    }
    assert stores == {str(tmp_path / "s" / "warehouse-sync" / "budget.sqlite3")}
    home = {"SYNC_CONFIG": env["SYNC_CONFIG"], "HOME": str(tmp_path / "home")}
    assert load_settings(home).budget_store == str(
        tmp_path / "home" / ".local" / "state" / "warehouse-sync" / "budget.sqlite3"
    )
    shared = "postgresql://sync@db.internal/dagster"
    assert load_settings(env | {"SYNC_STORE": shared}).budget_store == shared
    assert load_settings(env | {"SYNC_STORE": shared, STORE_VARIABLE: OFF}).budget_store == OFF


def test_a_moment_of_another_clock_is_never_slept_on(tmp_path):
    """A slot stored far ahead (by the monotonic clock before a reboot) is taken as now; a
    process whose wall clock is moved (the live soak travels in time) shares the budget with
    one whose is not, and neither waits hours on the other."""
    path = tmp_path / "budget.sqlite3"
    store = open_budget(str(path))
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO warehouse_sync_budget VALUES ('k', 'b', ?)", (time.monotonic() + 1e6,)
        )
    assert store.reserve("k", "b", 0.5) <= 0.5
    store.hold("k", "b", 2.0)
    with time_machine.travel(datetime(2030, 1, 1, tzinfo=UTC), tick=True):
        waited = store.reserve("k", "b", 0.5)
    assert 1.0 < waited <= 2.5  # the hold, not years


def test_a_request_that_wakes_past_the_next_slot_takes_a_new_one(tmp_path, monkeypatch):
    """On a busy machine a sleeper wakes late: one whose next slots other processes took
    meanwhile is not sent beside theirs, it waits for a slot of its own; one on time is
    sent. The clock is the test's, so is every sleep."""
    budget = open_budget(str(tmp_path / "budget.sqlite3"))
    pacer = SharedPacer(budget, "k", "default", Rate(REQUESTS_PER_MINUTE, WINDOW))
    clock, sleeps = [1_000.0], []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock[0] += seconds
        if len(sleeps) == 1:  # others take the next three slots; this one wakes after them
            for _ in range(3):
                budget.reserve("k", "default", pacer.interval)
            clock[0] += 3 * pacer.interval

    monkeypatch.setattr(pacing.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(pacing.time, "sleep", sleep)
    budget.reserve("k", "default", pacer.interval)  # a slot taken: the next waits
    pacer.wait()
    assert len(sleeps) == 2  # woke late, so a second slot, after the others'
    pacer.wait()
    assert len(sleeps) == 3  # on time: one sleep
