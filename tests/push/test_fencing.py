"""A push that stalls past its lease (a VM paused, a long garbage collection) sends nothing it
had not journaled under the lease: in Postgres each journal write checks, in the same
statement, that the lease is still the push's by the server's clock (`Lease.fence`); on one
host the file lease's lock is kept while its holder lives, paused or not."""

import os
import signal
import subprocess
import sys
import time

import duckdb
import psycopg
import pytest

from pipelines.push.lease import TABLE, Lease, PushBusy, no_push_alive
from pipelines.push.send import WORKERS
from pipelines.push.shared_journal import TABLE as JOURNAL
from pipelines.push.shared_journal import PostgresJournal
from tests.push.test_overlap import ROOT, each_event_stored_once, start_push
from tests.push.test_push import held_as_expected, pushable, run_push


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


#: `python -m cli push` that stops itself (SIGSTOP) at its `argv[1]`th request, in the
#: worker that has just marked the row `sending` under the lease and not yet sent it: the
#: point where a stall past the lease could send a row twice.
STALLING_PUSH = """
import os, runpy, signal, sys, threading
from pipelines.clients.datahub import DataHubClient
stop_at, calls, lock, submit = int(sys.argv[1]), [0], threading.Lock(), DataHubClient.submit
def stalling(self, *args, **options):
    with lock:
        calls[0] += 1
        stop = calls[0] == stop_at
    if stop:
        os.kill(os.getpid(), signal.SIGSTOP)
    return submit(self, *args, **options)
DataHubClient.submit = stalling
sys.argv = ["cli", "push", "--types", *sys.argv[2:]]
runpy.run_module("cli", run_name="__main__", alter_sys=True)
"""


def in_doubt(resources, record_type: str) -> int:
    """The rows of one record type in doubt, as `sync.rejected` lists them."""
    with duckdb.connect(resources["lake"].warehouse_path, read_only=True) as con:
        query = "SELECT count(*) FROM sync.rejected WHERE source = 'in_doubt' AND record_type = ?"
        return con.execute(query, [record_type]).fetchone()[0]


def stopped(process: subprocess.Popen) -> bool:
    with open(f"/proc/{process.pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[0] == "T"


def test_a_push_paused_past_its_lease_sends_each_row_once(
    start_sandbox, sync_env, shared_store, monkeypatch
):
    """Over Postgres, for orders then behavior events: the first push stops (SIGSTOP) with
    two thirds of its rows sent, one worker between its `sending` mark and its request; the
    second waits for the lease to lapse, takes the lake and ends; the first, resumed, sends
    that one request (marked under its lease), journals its answers and stops, saying it
    lost the lease. At the sandbox each record is submitted once and each event stored once;
    the rows the first left unanswered were in doubt for the second (the first was alive),
    and none is left in doubt once the first has ended."""
    # The first push is paused far longer than uvicorn's 5 s keep-alive: a connection one of
    # its workers was about to write on would be closed under it, and its behaviour event
    # (sent at most once) left in doubt: the pause's doing, not the lease's.
    sandbox = start_sandbox(keep_alive_seconds=900)
    resources = pushable(sandbox, sync_env)
    types = ["order", "behavior_event"]
    planned = run_push(resources, dry_run=True, record_types=types)
    env = dict(os.environ, SYNC_STORE=shared_store, PUSH_LEASE_SECONDS="2")
    said_by_first = {}
    for record_type in types:
        stop_at = 2 * planned[record_type]["new"] // 3
        first = subprocess.Popen(
            [sys.executable, "-c", STALLING_PUSH, str(stop_at), record_type],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            deadline = time.monotonic() + 300
            while not stopped(first):
                assert first.poll() is None, first.communicate()[0]
                assert time.monotonic() < deadline
                time.sleep(0.01)
            second = start_push(env, [record_type])
            said = second.communicate(timeout=600)[0]
            assert second.returncode == 0, said
            assert 1 <= in_doubt(resources, record_type) <= WORKERS, said
        finally:
            first.send_signal(signal.SIGCONT)
        told = said_by_first[record_type] = first.communicate(timeout=300)[0]
        assert first.returncode == 1, told
        assert "this push lost the lake's lease" in told and "Traceback" not in told

    monkeypatch.setenv("SYNC_STORE", shared_store)  # the first's last answers are there
    after = run_push(resources, dry_run=True, record_types=types)
    left = [(f["new"], f["in_doubt"]) for f in after.values()]
    assert left == [(0, 0), (0, 0)], said_by_first
    held = held_as_expected(sandbox, resources, "order")
    assert [key for key, entry in held.items() if entry["submissions"] != 1] == []
    each_event_stored_once(sandbox, resources, planned["behavior_event"]["new"])


def test_a_new_holder_knows_whether_an_earlier_push_of_the_lake_is_alive(shared_store, tmp_path):
    """Over Postgres each holder keeps a shared lock on its session while it lives, stopped
    or not: the next holder is `alone` only once that session has ended (the process died,
    or ended)."""
    lake = str(tmp_path / "lake")
    env = {"SYNC_STORE": shared_store}
    assert no_push_alive(lake, env)
    first = Lease(lake, "the paused one", env=env, ttl=30.0)
    first.acquire(wait=0)
    assert first.alone
    assert not no_push_alive(lake, env)
    with psycopg.connect(shared_store, autocommit=True) as db:
        db.execute(f"UPDATE {TABLE} SET expires_at = expires_at - 3600")  # it stalled
    second = Lease(lake, "the next one", env=env, ttl=30.0)
    second.acquire(wait=0)
    second.release()
    assert not second.alone  # the first's session lives: it may still send
    first.release()  # its session ends, as a killed process's does
    third = Lease(lake, "the one after", env=env, ttl=30.0)
    third.acquire(wait=0)
    try:
        assert third.alone
    finally:
        third.release()
    assert no_push_alive(lake, env)
