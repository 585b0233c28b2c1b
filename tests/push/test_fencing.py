"""A push that stalls past its lease (a VM paused, a long garbage collection) sends nothing it
had not journaled under the lease: in Postgres each journal write checks, in the same
statement, that the lease is still the push's by the server's clock (`Lease.fence`); on one
host the file lease's lock is kept while its holder lives, paused or not."""

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from pipelines.push.lease import TABLE, Lease, PushBusy
from pipelines.push.send import WORKERS
from pipelines.push.shared_journal import TABLE as JOURNAL
from pipelines.push.shared_journal import PostgresJournal
from tests.push.test_overlap import ROOT, each_event_stored_once, start_push
from tests.push.test_push import pushable, rejected_rows, run_push, submissions


def journaled(store: str) -> int:
    with psycopg.connect(store) as db:
        return db.execute(f"SELECT count(*) FROM {JOURNAL}").fetchone()[0]


def test_a_journal_write_once_the_lease_lapsed_by_the_stores_clock_is_refused(
    shared_store, tmp_path
):
    lake = str(tmp_path / "lake")
    env = {"SYNC_STORE": shared_store}
    paused = Lease(lake, "the paused one", env=env, ttl=30.0)
    paused.acquire(wait=0)
    journal = PostgresJournal(shared_store, lake)
    assert journal.record([{"key": "before"}], lease=paused) == 1
    # The server's clock passes the lease's end while the holder is stopped; the next push
    # takes the lake. The paused one's own clock has not moved on: it thinks it holds it.
    with psycopg.connect(shared_store, autocommit=True) as db:
        db.execute(f"UPDATE {TABLE} SET expires_at = expires_at - 3600")
    taker = Lease(lake, "the next one", env=env, ttl=30.0)
    taker.acquire(wait=0)
    try:
        assert paused.held()
        with pytest.raises(Exception, match="this push lost the lake's lease") as lost:
            journal.record([{"key": "after"}], lease=paused)
        assert type(lost.value).__name__ == "LeaseLost" and lost.value.exit_code == 1
        assert journaled(shared_store) == 1  # nothing of it written
        assert journal.record([{"key": "the taker's"}], lease=taker) == 1
    finally:
        taker.release()
        paused.release()


def test_on_one_host_a_paused_holder_keeps_the_lake(tmp_path):
    """No `SYNC_STORE`: the lease is a lock the kernel holds for the process, so no other
    push takes the lake while it is stopped."""
    lake = str(tmp_path / "lake")
    env = {k: v for k, v in os.environ.items() if k != "SYNC_STORE"}
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\n"
            "from pipelines.push.lease import Lease\n"
            f"Lease({lake!r}, 'the paused one', ttl=1.0).acquire(wait=0)\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        holder.send_signal(signal.SIGSTOP)
        other = Lease(lake, "the next one", env=env, ttl=1.0)
        with pytest.raises(PushBusy, match="the paused one"):
            other.acquire(wait=4.0, log=lambda _: None)  # four lease lengths
    finally:
        holder.kill()
        holder.wait()


def test_a_push_paused_past_its_lease_sends_nothing_more_and_each_event_is_stored_once(
    start_sandbox, sync_env, shared_store
):
    """Over Postgres: the first push is stopped (SIGSTOP) once a third of its events are
    out; the second takes the lake when the lease lapses and ends; the first, resumed, finds
    the lease lost (its writes refused, or its own count of the lease's time) and stops
    saying so. The events it sent without an answer journaled are in doubt, and not sent
    again. Whether a worker was stopped between its check of the lease and its journal write
    is chance: `test_a_journal_write_once_the_lease_lapsed_by_the_stores_clock_is_refused` is
    what shows that write refused."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env, customers=300)
    planned = run_push(resources, dry_run=True, record_types=["behavior_event"])
    events = planned["behavior_event"]["new"]
    env = dict(os.environ, SYNC_STORE=shared_store, PUSH_LEASE_SECONDS="3")
    first = start_push(env, ["behavior_event"])
    try:
        deadline = time.monotonic() + 300
        while submissions(sandbox) < events // 3:
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        first.send_signal(signal.SIGSTOP)
        second = start_push(env, ["behavior_event"])
        said = second.communicate(timeout=600)[0]
    finally:
        first.send_signal(signal.SIGCONT)
    told = first.communicate(timeout=300)[0]
    assert second.returncode == 0, said
    assert first.returncode == 1, told
    assert "this push lost the lake's lease" in told and "Traceback" not in told

    third = start_push(env, ["behavior_event"])
    assert third.communicate(timeout=600)[0] and third.returncode == 0
    # Sent once at most: those the first sent unanswered (its connection may have been closed
    # while it was stopped) are in doubt, and the third push did not send them again.
    in_doubt = len(rejected_rows(resources, "in_doubt"))
    assert in_doubt <= WORKERS
    each_event_stored_once(sandbox, resources, events, in_doubt)
