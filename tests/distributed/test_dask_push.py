"""The push (`assets/push.py`, `pipelines/push/run.py`) on the Dask cluster of
tests/distributed/conftest.py: the worker running it is killed mid-way, and the push completes
on the other worker from the journal in the deployment's Postgres
(`pipelines/push/shared_journal.py`), once the dead holder's lease (`pipelines/push/lease.py`)
has lapsed. At the sandbox nothing is doubled beyond what was in flight at the kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import dagster as dg
import httpx
import pytest

import demo
from assets.resources import build_resources
from pipelines.push import send
from pipelines.push.ledger import as_json
from pipelines.push.validation import validate_record
from pipelines.settings import load_settings
from pipelines.warehouse.relations import refresh_warehouse
from tests.distributed.conftest import Deployment
from tests.distributed.test_dask import RUN_SECONDS
from tests.push.test_push import (
    held_as_expected,
    outbound,
    pushable,
    run_push,
    submissions,
)

STEP = "push_to_datahub"
#: Records sent as often as needed, then events sent at most once: both kinds of resume.
TYPES = ["coupon", "order", "behavior_event"]
#: Enough rows that the kill lands mid-way (some 400 orders: the kill comes after about 200
#: of them, while the sandbox's count is read every 5 ms); few enough that both pushes' plans
#: and sends stay a small part of the test (400 customers cost some 15 s more CPU).
CUSTOMERS = 200
#: How long a dead holder's lease outlives it: the resumed push waits this long, not 30 s.
#: Not shorter: a live holder renews every third of it, and a renewal starved of the CPU
#: on a busy machine for that long would lose the lease and fail the push.
LEASE_SECONDS = "10"

T = TypeVar("T")


@pytest.fixture
def frozen_sandbox(start_sandbox):
    """A sandbox of this test's own for the deployment: the push changes what the sandbox
    holds, and the shared one (tests/pipelines/conftest.py) is only ever read."""
    return start_sandbox()


@pytest.fixture(autouse=True)
def push_settings(monkeypatch) -> None:
    """Settings every host gets: in the environment before `deployment` copies it (autouse
    fixtures are set up first). The demo's outbound views, and a short lease."""
    for name, value in demo.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PUSH_LEASE_SECONDS", LEASE_SECONDS)


def start_push(deployment: Deployment, types: list[str]) -> tuple[subprocess.Popen, Path]:
    """The `push` job of `types`, launched and not waited for: its process and its log."""
    config = deployment.launcher.folder / "push.json"  # JSON is YAML, as `--config` reads
    config.write_text(json.dumps({"ops": {STEP: {"config": {"record_types": types}}}}))
    return deployment.start_job("push", "--config", str(config))


def wait_for(
    what: str, found: Callable[[], T | None], push: subprocess.Popen, log: Path, every: float
) -> T:
    """`found()` once it is not None, asked `every` seconds while the push runs; a bound on
    the wait, not a figure."""
    deadline = time.monotonic() + RUN_SECONDS
    while (value := found()) is None:
        assert push.poll() is None, f"the push ended before {what}\n{log.read_text()[-5000:]}"
        assert time.monotonic() < deadline, f"no {what}\n{log.read_text()[-5000:]}"
        time.sleep(every)
    return value


def step_pids(instance: dg.DagsterInstance, event: dg.DagsterEventType) -> list[int]:
    """The processes the push step's events of `event` came from, over every run, in order."""
    return [
        entry.dagster_event.pid
        for run in instance.get_runs()
        for entry in instance.all_logs(run.run_id, of_type=event)
        if entry.dagster_event.step_key == STEP
    ]


def stored_events(sandbox) -> Counter:
    """How often the sandbox stored each behavior event body."""
    stored = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/behavior-events/all").json()
    return Counter(as_json(entry["event"]) for entry in stored)


def valid_event_keys(resources) -> Counter:
    """How many valid event keys carry each behavior event body (some events are alike)."""
    keys = Counter()
    for row in outbound(resources, "behavior_events"):
        body, problems = validate_record("behavior_event", row)
        if not problems:
            keys[as_json(body)] += 1
    return keys


def warehouse_rows(resources, sql: str) -> list[tuple]:
    """`sql` over this host's warehouse, refreshed from the bucket: what an analyst reads.
    (`rejected_rows` of tests/push/test_push.py opens it without the lake's filesystem, so
    it reads a local lake only.)"""
    lake = resources["lake"]
    refresh_warehouse(lake.lake_root, lake.warehouse_path, lake.warehouse_sql)
    with lake.lake().connect(lake.warehouse_path, read_only=True) as con:
        return con.execute(sql).fetchall()


def test_a_push_whose_worker_is_killed_completes_on_the_other_with_nothing_doubled(
    deployment, monkeypatch
):
    """The worker running the push step is SIGKILLed amid the orders; Dask runs the step
    again on the surviving worker, which waits for the dead holder's lease and resumes from
    the shared journal. Records: each key holds its newest valid version, resent at most
    once per request in flight. Behavior events: none stored twice, any in flight at the
    kill reported in doubt. The ledger holds one acceptance per key sent."""
    sandbox = deployment.sandbox
    # This process is a host too: the environment is the deployment's, the lake the bucket.
    resources = pushable(sandbox, lambda _: build_resources(load_settings()), customers=CUSTOMERS)
    planned = run_push(resources, dry_run=True, record_types=TYPES)
    records = planned["coupon"]["new"] + planned["order"]["new"]
    assert planned["order"]["new"] > 4 * send.WORKERS < planned["behavior_event"]["new"], planned
    # Killed amid the orders (coupons first, then orders, then events, as TYPES): records in
    # flight are sent again, so this is where a resend could double one.
    kill_at = planned["coupon"]["new"] + planned["order"]["new"] // 2

    # This process reads the run as the UI would: an instance on the same storage.
    monkeypatch.setenv("DAGSTER_HOME", str(deployment.launcher.folder / "dagster"))
    with dg.DagsterInstance.get() as instance:
        push, log = start_push(deployment, TYPES)
        try:
            started = dg.DagsterEventType.STEP_START
            # The event log is in Postgres: asked a few times a second, not hammered.
            [killed] = wait_for(
                "push step", lambda: step_pids(instance, started) or None, push, log, every=0.2
            )
            assert killed in deployment.worker_pids.values(), deployment.worker_pids
            wait_for(
                "half the orders sent",
                lambda: submissions(sandbox) >= kill_at or None,
                push,
                log,
                every=0.005,  # the sandbox's count, in this process: the kill lands near it
            )
            os.kill(killed, signal.SIGKILL)
            at_kill = submissions(sandbox)
            assert at_kill < records, "the orders were sent before the worker was killed"
            # Dask runs a task whose worker died again elsewhere (up to
            # distributed.scheduler.allowed-failures times): the same run goes on.
            push.wait(timeout=RUN_SECONDS)
        finally:
            if push.poll() is None:
                push.kill()
                push.wait()
        said = log.read_text()
        assert push.returncode == 0, said[-5000:] + deployment.tails()
        [run] = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.SUCCESS
        [survivor] = set(deployment.worker_pids.values()) - {killed}
        assert step_pids(instance, started) == [killed, survivor]
        assert step_pids(instance, dg.DagsterEventType.STEP_SUCCESS) == [survivor]
    assert submissions(sandbox) > at_kill

    twice = 0
    sent_keys = {}
    for record_type in ("coupon", "order"):
        held = held_as_expected(sandbox, resources, record_type)
        twice += sum(entry["submissions"] - 1 for entry in held.values())
        sent_keys[record_type] = set(held)
    assert twice <= send.WORKERS  # the requests in flight at the kill

    # Behavior events are sent at most once: those in flight at the kill are in doubt, and
    # only they may be missing; none is stored more often than the keys that carry it.
    in_doubt = {
        key
        for (key,) in warehouse_rows(
            resources, "SELECT key FROM sync.rejected WHERE source = 'in_doubt'"
        )
    }
    stored = stored_events(sandbox)
    keys_of = valid_event_keys(resources)
    events = planned["behavior_event"]["new"]
    assert all(count <= keys_of[body] for body, count in stored.items())
    assert sum(stored.values()) <= events <= sum(stored.values()) + len(in_doubt)
    assert len(in_doubt) <= send.WORKERS

    # The ledger (`sync.pushed`): one acceptance per key sent, whichever worker sent it.
    accepted = warehouse_rows(
        resources,
        "SELECT record_type, key, count(*) FROM sync.pushed WHERE state = 'accepted' GROUP BY ALL",
    )
    assert {count for _, _, count in accepted} == {1}
    by_type = {t: {key for record_type, key, _ in accepted if record_type == t} for t in TYPES}
    for record_type, keys in sent_keys.items():
        assert by_type[record_type] == keys, record_type
    assert not by_type["behavior_event"] & in_doubt
    assert len(by_type["behavior_event"]) + len(in_doubt) == events
