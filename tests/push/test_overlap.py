"""Pushes that overlap (a schedule beside a run from the UI) and a journal that stops taking
answers: at the sandbox, each record submitted once, each behavior event stored once, one
import task per batch."""

import errno
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from assets.sync import failure_reason
from cli.main import main
from pipelines.errors import SetupError
from pipelines.push import journal as journal_module
from pipelines.push import send
from pipelines.push.lease import Lease, PushBusy, holder_name, wait_seconds
from pipelines.push.ledger import Ledger, as_json
from pipelines.push.plan import SENDING, make_plan
from pipelines.push.shared_journal import PostgresJournal
from pipelines.push.validation import validate_record
from tests.push.test_push import (
    MANY_CUSTOMERS,
    RECORDS,
    held_as_expected,
    outbound,
    push_until,
    pushable,
    rejected_rows,
    run_push,
    submissions,
)

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = [*RECORDS, "behavior_event", "member_import"]


def start_push(env: dict, types: list[str]) -> subprocess.Popen:
    """`python -m cli push` as cron or a person runs it."""
    return subprocess.Popen(
        [sys.executable, "-m", "cli", "push", "--types", *types],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def each_event_stored_once(sandbox, resources, planned: int, in_doubt: int = 0) -> None:
    """Behavior events: as many stored as were planned (less at most those `in_doubt`, which
    may not have arrived), no body more often than the valid event keys that carry it (some
    events are alike)."""
    keys_of = Counter()
    for row in outbound(resources, "behavior_events"):
        body, problems = validate_record("behavior_event", row)
        if not problems:
            keys_of[as_json(body)] += 1
    stored = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/behavior-events/all").json()
    assert planned - in_doubt <= len(stored) <= planned
    bodies = Counter(as_json(entry["event"]) for entry in stored)
    assert all(count <= keys_of[body] for body, count in bodies.items())


def resent(sandbox, resources, record_types) -> int:
    """Submissions beyond the first over every key of `record_types`, each key asserted to
    hold its newest valid version."""
    return sum(
        entry["submissions"] - 1
        for record_type in record_types
        for entry in held_as_expected(sandbox, resources, record_type).values()
    )


def failed_push(resources, record_types: list[str]) -> str:
    """The reason of a push that must fail."""
    failed = run_push(resources, record_types=record_types, check=False)
    assert not failed.success
    [failure] = [e for e in failed.all_events if e.is_step_failure]
    return failure_reason(failure)


def test_pushes_started_together_and_apart_send_everything_once(start_sandbox, sync_env):
    """Three pushes of everything over one lake: two started together, a third once the
    sandbox has taken the first records, while one of them sends. One holds the lake's
    lease, the others wait for it and then find nothing left to send; all three exit 0.
    Before the lease, two pushes stored every behavior event twice and started every member
    import twice. (The third started 1.5 s after the others, over 1,000 customers so that it
    came before the sends had ended: started by what the sandbox saw, it needs no more rows
    than the other push tests.)"""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env, customers=MANY_CUSTOMERS)
    planned = run_push(resources, dry_run=True, record_types=EVERYTHING)
    env = dict(os.environ)
    pushes = [start_push(env, EVERYTHING), start_push(env, EVERYTHING)]
    deadline = time.monotonic() + 300
    while submissions(sandbox) == 0:  # records go after the imports: the holder sends
        assert all(push.poll() is None for push in pushes), "a push ended before any record"
        assert time.monotonic() < deadline, "no record sent"
        time.sleep(0.01)
    pushes.append(start_push(env, EVERYTHING))
    started_at = submissions(sandbox)
    outputs = [push.communicate(timeout=600)[0] for push in pushes]
    assert [push.returncode for push in pushes] == [0, 0, 0], outputs
    waited = [out for out in outputs if "waiting for another push of this lake" in out]
    assert len(waited) >= 1, outputs  # the later ones said whom they waited for
    assert all("pid" in out for out in waited)
    sends = sum(planned[t]["new"] for t in RECORDS) + planned["behavior_event"]["new"]
    assert started_at < sends  # the third started while the holder sent

    for record_type in RECORDS:
        held = held_as_expected(sandbox, resources, record_type)
        assert held, record_type
        assert {entry["submissions"] for entry in held.values()} == {1}, record_type
    assert planned["behavior_event"]["new"] > 500
    each_event_stored_once(sandbox, resources, planned["behavior_event"]["new"])
    tasks = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/imports").json()
    rows = planned["member_import"]["new"]
    assert rows > 0
    import_keys = {row["import_key"] for row in outbound(resources, "member_imports")}
    assert len(tasks) == len(import_keys)  # each under 10,000 rows: one task per batch
    assert sum(task["rows"] for task in tasks) == rows


def test_a_push_that_finds_the_lake_held_ends_with_its_exit_code_naming_the_holder(
    start_sandbox, sync_env
):
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    lake_root = str(resources["lake"].lake_root)
    holder = Lease(lake_root, holder_name("a-run-from-the-ui"))
    holder.acquire(wait=0)
    try:
        push = start_push(dict(os.environ, PUSH_WAIT_SECONDS="1"), ["coupon"])
        output = push.communicate(timeout=300)[0]
    finally:
        holder.release()
    assert push.returncode == PushBusy.exit_code == 3, output
    assert "another push holds the lake" in output
    assert "run a-run-from-the-ui" in output and f"pid {os.getpid()}" in output
    assert "Traceback" not in output
    assert submissions(sandbox) == 0


@pytest.fixture(params=["file", "postgres"])
def lease_env(request, tmp_path) -> dict:
    env = {"LAKE_ROOT": str(tmp_path / "lake")}
    if request.param == "postgres":
        env["SYNC_STORE"] = request.getfixturevalue("postgres_url")
    return env


def test_a_lease_is_held_by_one_and_freed_by_a_holder_that_died(lease_env, tmp_path):
    """A second taker waits while the holder lives and renews; a holder killed without a
    word frees the lake once its lease lapses, nobody releasing it by hand."""
    lake = lease_env["LAKE_ROOT"]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pipelines.push.lease import Lease\n"
            f"lease = Lease({lake!r}, 'the killed one', ttl=6.0)\n"
            "lease.acquire(wait=0)\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n",
        ],
        cwd=ROOT,
        env=dict(os.environ, **lease_env),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        said = []
        other = Lease(lake, "the waiting one", env=lease_env, ttl=6.0)
        with pytest.raises(Exception, match="the killed one"):
            other.acquire(wait=8.0, log=said.append)  # renewed meanwhile: still held
        assert said and "the killed one" in said[0]
        holder.kill()
        holder.wait()
        started = time.monotonic()
        other.acquire(wait=60.0, log=said.append)
        assert time.monotonic() - started < 30
        assert other.held()
        other.release()
    finally:
        holder.kill()
        holder.wait()


def test_a_journal_that_fails_part_way_stops_the_sends_at_once(
    start_sandbox, sync_env, monkeypatch
):
    """The journal's disk fills after 80 writes (40 rows, each marked `sending` then
    answered): the push stops with one message naming PUSH_JOURNAL, and the next push
    resends at most the requests that were in flight. Before, the workers went on through
    the 500 rows queued to them, unjournaled."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    types = ["coupon", "order"]
    writes = {"left": 80}
    real_write = os.write

    def filling(fd: int, data: bytes) -> int:
        if writes["left"] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        writes["left"] -= 1
        return real_write(fd, data)

    monkeypatch.setattr(journal_module.os, "write", filling)
    message = failed_push(resources, types)
    assert "the push journal at" in message and "PUSH_JOURNAL" in message
    assert "No space left on device" in message
    sent_before = submissions(sandbox)
    assert 40 <= sent_before <= 40 + send.WORKERS

    monkeypatch.setattr(journal_module.os, "write", real_write)
    run_push(resources, record_types=types)
    twice = resent(sandbox, resources, types)
    assert twice <= send.WORKERS


def test_with_a_shared_store_a_push_killed_on_a_host_that_goes_away_resumes_on_another(
    start_sandbox, sync_env, shared_store, tmp_path
):
    """`SYNC_STORE` set: the journal and the lease are in Postgres. Each killed push's host
    folder (everything beside the lake but the lake) is wiped before the next starts, as a
    pod's disk goes with it; what was acknowledged is still never sent again."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    types = ["coupon", "order", "behavior_event"]
    planned = run_push(resources, dry_run=True, record_types=types)
    total = sum(figures["new"] for figures in planned.values())
    # A killed holder's lease lapses in 2 s, not 30: the next push need not wait long.
    env = dict(os.environ, SYNC_STORE=shared_store, PUSH_LEASE_SECONDS="2")
    host_folder = Path(os.environ["LAKE_ROOT"]).parent / "push"
    output = tmp_path / "push.log"
    records = planned["coupon"]["new"] + planned["order"]["new"]
    # One kill amid the records (sent again when in doubt), one amid the behavior events
    # (never sent again): the second push resumes from what the first left in the store.
    kills = (records // 2, (records + total) // 2)
    for cut in kills:
        stop_at = max(cut, submissions(sandbox) + 1)
        assert push_until(sandbox, env, types, stop_at, output) is None, output.read_text()
        shutil.rmtree(host_folder, ignore_errors=True)
    assert push_until(sandbox, env, types, None) == 0
    assert not list(host_folder.glob("journal/*.jsonl"))  # nothing of it on this host

    twice = resent(sandbox, resources, ("coupon", "order"))
    stored = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/behavior-events/all").json()
    in_doubt = len(rejected_rows(resources, "in_doubt"))
    # Behavior events are sent at most once: a kill leaves its in-flight ones in doubt.
    assert len(stored) + in_doubt >= planned["behavior_event"]["new"]
    assert len(stored) <= planned["behavior_event"]["new"]
    assert twice <= len(kills) * send.WORKERS


def test_a_shared_journal_that_refuses_part_way_stops_the_sends_at_once(
    start_sandbox, sync_env, shared_store, monkeypatch
):
    """The store refuses its 81st row (a trigger raising Postgres's own `disk_full`; a row
    is marked `sending`, then answered): one message naming SYNC_STORE, and the next push
    resends at most the requests that were in flight."""
    import psycopg

    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    monkeypatch.setenv("SYNC_STORE", shared_store)
    with psycopg.connect(shared_store, autocommit=True) as db:
        for statement in PostgresJournal._SETUP:
            db.execute(statement)
        db.execute(REFUSE_AFTER_80)
    types = ["coupon", "order"]
    message = failed_push(resources, types)
    assert "the push journal at" in message and "SYNC_STORE" in message
    assert "No space left on device" in message
    assert 40 <= submissions(sandbox) <= 40 + send.WORKERS

    with psycopg.connect(shared_store, autocommit=True) as db:
        db.execute("DROP TRIGGER refuse ON warehouse_sync_push_journal")
    run_push(resources, record_types=types)
    twice = resent(sandbox, resources, types)
    assert twice <= send.WORKERS


#: A store that fills up once it holds 80 rows.
REFUSE_AFTER_80 = """
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM warehouse_sync_push_journal) >= 80 THEN
        RAISE EXCEPTION 'could not extend file: No space left on device'
            USING ERRCODE = 'disk_full';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse BEFORE INSERT ON warehouse_sync_push_journal
    FOR EACH ROW EXECUTE FUNCTION refuse();
"""


def test_lease_settings_are_seconds(tmp_path):
    env = {"LAKE_ROOT": str(tmp_path / "lake"), "PUSH_LEASE_SECONDS": "5"}
    assert Lease(env["LAKE_ROOT"], "me", env=env).ttl == 5.0
    assert wait_seconds({"PUSH_WAIT_SECONDS": "0"}) == 0.0
    assert wait_seconds({}) == 600.0
    for wrong in ("soon", "-1", "inf"):
        with pytest.raises(SetupError, match="PUSH_WAIT_SECONDS"):
            wait_seconds({"PUSH_WAIT_SECONDS": wrong})


def test_the_push_commands_options_as_the_readme_gives_them(start_sandbox, sync_env, capsys):
    """`push --dry-run` plans and sends nothing; `push --types … --resend-in-doubt` sends
    those types only (with nothing in doubt, as a plain push)."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    assert main(["push", "--dry-run", "--types", "coupon", "behavior_event"]) == 0
    table = capsys.readouterr().out
    coupons = next(line.split() for line in table.splitlines() if line.startswith("coupon "))
    assert int(coupons[1].replace(",", "")) > 0  # new
    assert submissions(sandbox) == 0

    assert main(["push", "--types", "behavior_event", "--resend-in-doubt"]) == 0
    planned = run_push(resources, dry_run=True, record_types=["coupon", "behavior_event"])
    assert planned["behavior_event"]["new"] == 0 and planned["coupon"]["new"] > 0
    stored = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/behavior-events/all").json()
    assert stored and submissions(sandbox) == len(stored)


def test_chosen_rows_in_doubt_are_sent_again_and_the_others_stay_in_doubt(start_sandbox, sync_env):
    """`push --resend KEY` (the job's `resend_keys` in the UI): of two behavior events a
    killed push left marked `sending` without an answer, only the one named is sent, once;
    the other stays in doubt, listed in `sync.rejected`."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    bodies = Counter()
    for row in outbound(resources, "behavior_events"):
        body, problems = validate_record("behavior_event", row)
        bodies[as_json(body)] += 0 if problems else 1
    plan = make_plan("behavior_event", outbound(resources, "behavior_events"), {})
    chosen, left = [p for p in plan.to_send if bodies[as_json(p.body)] == 1][:2]
    with Ledger(resources["lake"].lake()) as ledger:  # what a killed push leaves
        ledger.record(
            "behavior_event",
            [
                {
                    "key": p.key,
                    "timestamp": p.timestamp,
                    "content_hash": p.content_hash,
                    "content": p.content,
                    "state": SENDING,
                    "event_id": None,
                    "connection": p.connection,
                }
                for p in (chosen, left)
            ],
        )
    assert main(["push", "--types", "behavior_event", "--resend", chosen.key]) == 0
    stored = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/behavior-events/all").json()
    held = Counter(as_json(entry["event"]) for entry in stored)
    assert (held[as_json(chosen.body)], held[as_json(left.body)]) == (1, 0)
    assert len(stored) == len(plan.to_send) - 1
    after = run_push(resources, dry_run=True, record_types=["behavior_event"])
    assert (after["behavior_event"]["new"], after["behavior_event"]["in_doubt"]) == (0, 1)
