"""The fault pass: each command run as a user runs it (`sync`, `push`, `warehouse`,
`check`, the webhook receiver) under each fault of its environment (a full disk, the object
store gone, a damaged file, a killed process) ends with one line naming the cause, with no
traceback, and the next run converges to the truth.

| command   | full disk     | store gone mid-run     | damaged file     | killed        |
|-----------|---------------|------------------------|------------------|---------------|
| sync      | here          | here (up- and download)| test_damaged.py  | test_sync.py  |
| warehouse | here          | here (before)          | test_damaged.py  | here          |
| check     | here          | here (before)          | here (set aside) | here          |
| push      | here          | here                   | here (ledger)    | test_push.py  |
| receiver  | test_receiver | test_shared_inbox (pg) | here (inbox)     | test_receiver |

The faulted run is a process started as a user starts it (`command`, `meanwhile`); the runs
that prepare the fault and the one that converges after it run in this process
(`run_here`): their exit code and output are what is asserted, and a process start costs
some 3 s of CPU.

The warehouse and the check take a second: the store is gone before they start. The
receiver's store is the shared store (`SYNC_STORE`), never the object store. Elsewhere:
tests/pipelines/, tests/push/ and tests/webhooks/.
"""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import httpx

import demo
from pipelines.lake import Lake
from pipelines.pull.landing import today
from pipelines.push.ledger import PUSHED
from pipelines.streams.comment import TRIGGER_LOGS
from pipelines.webhooks.compaction import compact
from pipelines.webhooks.inbox import Inbox
from tests.faults.conftest import command, meanwhile, run_here, told
from tests.pipelines.test_comment import workspace_id
from tests.pipelines.test_damaged import damage, landed_days
from tests.push.test_push import RECORDS, held_as_expected, pushable, submissions
from tests.webhooks.conftest import SECRET, envelope, signed

STREAMS = ("--streams", "accounts", "trigger_logs")
#: Days back from today that a sync here lands unless its test needs the whole history: long
#: enough that the store is stopped while a sync onto it still lands, short enough to be
#: quick, through the proxy or not.
RECENT_DAYS = 20


def recent() -> tuple[str, tuple[str, ...]]:
    """The first of the recent days, and `sync`'s options for them: the streams and the range
    from that day to today."""
    first = (today() - timedelta(days=RECENT_DAYS)).isoformat()
    return first, (*STREAMS, "--start", first, "--end", today().isoformat())


def truth_days(sandbox, first: str = "") -> dict[str, int]:
    """The sandbox's trigger logs per day from `first` on (all, without it), the days with
    any."""
    truth = sandbox.truth_days("comment", workspace_id(sandbox), "trigger_logs")
    return {day: count for day, count in truth.items() if count and first <= day}


def truth_total(sandbox, first: str = "") -> int:
    """The sandbox's trigger logs of the days from `first` on (all, without it)."""
    return sum(truth_days(sandbox, first).values())


def counted(output: str, relation: str) -> int:
    """A relation's row count from the table `sync` and `warehouse` print (what each stream
    landed is said on lines that start with its relation too)."""
    cells = [line.split() for line in output.splitlines()]
    [rows] = [row[1] for row in cells if len(row) == 2 and row[0] == relation]
    return int(rows.replace(",", ""))


def test_sync_on_a_full_disk_names_the_lake_and_the_warehouse_then_converges(
    frozen_sandbox, sync_env
):
    sync_env(frozen_sandbox)
    lake_root, warehouse = os.environ["LAKE_ROOT"], os.environ["WAREHOUSE_PATH"]
    first, sync = recent()

    code, output = command("sync", *sync, room=False)
    assert code == 1
    for stream in ("accounts", "trigger_logs"):
        told(output, f"FAILED comment.{stream}: 1 connection(s) failed")
    told(output, "- comment connection 'default'", f"LAKE_ROOT={lake_root}: its disk refused")
    told(output, "FAILED warehouse: ", f"WAREHOUSE_PATH={warehouse}: its disk refused")

    code, output = run_here("sync", *sync)
    assert code == 0, output
    assert landed_days(Lake(lake_root)) == truth_days(frozen_sandbox, first)
    assert counted(output, "comment.trigger_logs") == truth_total(frozen_sandbox, first)


def test_sync_with_the_store_gone_mid_run_names_the_store_then_converges(
    frozen_sandbox, sync_env, object_store, monkeypatch
):
    """Regression: `comment connection 'default' (http://…): OSError: When uploading object …
    AWS Error NETWORK_CONNECTION`, then an uncaught traceback from the warehouse's refresh."""
    sync_env(frozen_sandbox, lake_root="s3://faults/lake")
    first = (today() - timedelta(days=RECENT_DAYS)).isoformat()
    args = ("--streams", "trigger_logs", "--start", first, "--end", today().isoformat())

    code, output = meanwhile(
        ("sync", *args),
        lambda: any(f.endswith(".parquet") for f in object_store.files("faults")),
        lambda _: object_store.stop(),  # the store goes away while the sync lands
    )
    assert code == 1, output
    assert "fault-test-secret" not in output
    told(output, "FAILED comment.trigger_logs: 1 connection(s) failed")
    for cause in ("- comment connection 'default'", "FAILED warehouse: "):
        line = told(output, cause, "LAKE_ROOT=s3://faults/lake", "AWS_ENDPOINT_URL")
        assert f"nothing answers at {object_store.endpoint}" in line, line

    object_store.start()
    code, output = run_here("sync", *args)
    assert code == 0, output
    assert landed_days(Lake("s3://faults/lake")) == truth_days(frozen_sandbox, first)


def test_sync_with_the_store_gone_while_it_downloads_names_the_store_then_converges(
    frozen_sandbox, sync_env, object_store
):
    """A sync of days already landed first reads every page of their files (downloads):
    the store goes away once it has sent the first of them."""
    sync_env(frozen_sandbox, lake_root="s3://faults/lake")
    first = (today() - timedelta(days=RECENT_DAYS)).isoformat()
    args = ("--streams", "trigger_logs", "--start", first, "--end", today().isoformat())
    code, output = run_here("sync", *args)
    assert code == 0, output
    files = object_store.files("faults")
    lake = Lake("s3://faults/lake")
    biggest = max(lake.fs.get_file_info(f).size for f in files if f.endswith(".parquet"))
    sent_before = object_store.proxy.downloaded

    code, output = meanwhile(
        ("sync", *args),
        lambda: object_store.proxy.downloaded > sent_before + biggest,
        lambda _: object_store.stop(),
    )
    assert code == 1, output
    assert "fault-test-secret" not in output
    line = told(output, "LAKE_ROOT=s3://faults/lake", "AWS_ENDPOINT_URL")
    assert f"nothing answers at {object_store.endpoint}" in line, line

    object_store.start()
    code, output = run_here("sync", *args)
    assert code == 0, output
    assert landed_days(lake) == truth_days(frozen_sandbox, first)


def test_warehouse_on_a_full_disk_names_its_path_then_converges(frozen_sandbox, sync_env):
    sync_env(frozen_sandbox)
    first, sync = recent()
    assert run_here("sync", *sync)[0] == 0
    warehouse = Path(os.environ["WAREHOUSE_PATH"])
    warehouse.unlink()  # a rebuild is due

    code, output = command("warehouse", room=False)
    assert code == 1
    line = told(output, "FAILED warehouse: ", f"WAREHOUSE_PATH={warehouse}: its disk refused")
    assert "free space there" in line and len(output.strip().splitlines()) == 1

    code, output = run_here("warehouse")
    assert code == 0, output
    assert counted(output, "comment.trigger_logs") == truth_total(frozen_sandbox, first)


def test_warehouse_with_the_store_gone_names_the_store_then_converges(
    frozen_sandbox, sync_env, object_store, monkeypatch
):
    sync_env(frozen_sandbox, lake_root="s3://faults/lake")
    first, sync = recent()
    assert run_here("sync", *sync)[0] == 0
    Path(os.environ["WAREHOUSE_PATH"]).unlink()
    object_store.stop()

    code, output = command("warehouse")
    assert code == 1, output  # the environment's: before, 2 told it as a setting to fix
    told(output, "s3://faults/lake", object_store.endpoint, "AWS_ENDPOINT_URL")
    assert len(output.strip().splitlines()) == 1 and "fault-test-secret" not in output

    object_store.start()
    code, output = run_here("warehouse")
    assert code == 0, output
    assert counted(output, "comment.trigger_logs") == truth_total(frozen_sandbox, first)


def test_warehouse_killed_while_it_builds_leaves_nothing_and_the_next_converges(
    frozen_sandbox, sync_env
):
    sync_env(frozen_sandbox)
    # The whole history: the more files, the longer the build it is killed in takes.
    assert run_here("sync", *STREAMS)[0] == 0
    warehouse = Path(os.environ["WAREHOUSE_PATH"])
    warehouse.unlink()  # a rebuild is due
    temporary = f".{warehouse.name}.*.tmp"
    code, _ = meanwhile(
        ("warehouse",),
        lambda: bool(list(warehouse.parent.glob(temporary))),
        lambda building: building.send_signal(signal.SIGKILL),
    )
    assert code == -signal.SIGKILL and list(warehouse.parent.glob(temporary))
    code, output = run_here("warehouse")
    assert code == 0, output
    assert counted(output, "comment.trigger_logs") == truth_total(frozen_sandbox)
    assert list(warehouse.parent.glob(f".{warehouse.name}.*")) == []


def checked(output: str) -> dict[str, str]:
    """The check's table: (service, connection) → result."""
    return {
        " ".join(line.split()[:2]): line.split()[-1]
        for line in output.splitlines()
        if line and not line.startswith(("FAILED", "WARN")) and len(line.split()) >= 3
    }


def test_check_on_a_full_disk_fails_the_lake_row_and_checks_the_rest(frozen_sandbox, sync_env):
    sync_env(frozen_sandbox)
    lake_root = os.environ["LAKE_ROOT"]

    code, output = command("check", room=False)
    assert code == 1
    rows = checked(output)
    assert rows.pop("lake LAKE_ROOT") == "FAILED" and rows.pop("datahub webhooks") == "WARN"
    assert rows.pop("conversation agent") == "WARN"  # no AGENT_TOKEN here
    assert set(rows.values()) == {"ok"}
    told(output, "FAILED lake LAKE_ROOT: ", f"LAKE_ROOT={lake_root}: its disk refused a write")
    assert run_here("check")[0] == 0


def test_check_with_the_store_gone_names_it_and_checks_the_rest(
    frozen_sandbox, sync_env, object_store, monkeypatch
):
    sync_env(frozen_sandbox, lake_root="s3://faults/lake")
    object_store.stop()

    code, output = command("check")
    assert code == 1
    rows = checked(output)
    assert rows.pop("lake LAKE_ROOT") == "FAILED" and "ok" in rows.values()
    told(output, "FAILED lake LAKE_ROOT: ", object_store.endpoint, "AWS_ENDPOINT_URL")

    object_store.start()
    assert run_here("check")[0] == 0


def test_check_warns_of_a_damaged_file_set_aside_until_someone_deletes_it(frozen_sandbox, sync_env):
    sync_env(frozen_sandbox)
    _, sync = recent()
    assert run_here("sync", *sync)[0] == 0
    lake = Lake(os.environ["LAKE_ROOT"])
    damage(Path(lake.files(TRIGGER_LOGS)[-1]), "truncated")
    assert run_here("sync", *sync)[0] == 0  # sets it aside, lands it again

    code, output = command("check")
    assert code == 0  # a warning: the day landed again
    assert checked(output)["lake LAKE_ROOT"] == "WARN"
    line = told(output, "WARN lake LAKE_ROOT: 1 damaged file(s) set aside in ")
    assert ".reason.txt" in line
    for kept in Path(lake.root, "_damaged").rglob("*.parquet.*"):
        kept.unlink()
    assert checked(run_here("check")[1])["lake LAKE_ROOT"] == "ok"


def test_a_killed_check_leaves_no_probe_behind(frozen_sandbox, sync_env):
    """`check` writes a small probe into the lake and removes it. Kills spread over a whole
    check's run leave nothing else; whether one lands between the probe's write and its
    removal is chance, so what that leaves is planted too: the next check removes a probe that
    old, never the probe of a check writing now."""
    sync_env(frozen_sandbox)
    lake_root = Path(os.environ["LAKE_ROOT"])
    started = time.monotonic()
    assert command("check")[0] == 0
    whole_run = time.monotonic() - started
    for share in (0.5, 0.9):
        checking = subprocess.Popen(
            [sys.executable, "-m", "cli", "check"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(whole_run * share)
        checking.send_signal(signal.SIGKILL)
        checking.wait(timeout=30)
    killed, writing = lake_root / ".check-elsewhere-1", lake_root / ".check-elsewhere-2"
    for probe in (killed, writing):
        probe.write_bytes(bytes(4096))
    an_hour_ago = time.time() - 3600
    os.utime(killed, (an_hour_ago, an_hour_ago))

    assert run_here("check")[0] == 0
    assert [p.name for p in lake_root.glob(".check*")] == [writing.name]


def shop(sandbox, sync_env, monkeypatch, lake_root: str = "") -> dict:
    """A lake the push can send from: the demo shop's records and views (as `make demo`)."""
    for name, value in demo.environment().items():
        monkeypatch.setenv(name, value)
    return pushable(sandbox, sync_env, customers=100, lake_root=lake_root)


def each_record_held_once(sandbox, resources) -> None:
    for record_type in RECORDS:
        held = held_as_expected(sandbox, resources, record_type)
        assert all(entry["submissions"] == 1 for entry in held.values()), record_type


def test_push_on_a_full_disk_names_it_then_converges(start_sandbox, sync_env, monkeypatch):
    sandbox = start_sandbox()
    resources = shop(sandbox, sync_env, monkeypatch)

    code, output = command("push", "--types", *RECORDS, room=False)
    assert code == 1
    line = told(output, "FAILED push: ", "LAKE_ROOT", "Errno 27")
    assert "StoreUnavailable" not in line and submissions(sandbox) == 0

    code, output = run_here("push", "--types", *RECORDS)
    assert code == 0, output
    each_record_held_once(sandbox, resources)


def test_push_with_the_store_gone_mid_run_names_it_then_converges(
    start_sandbox, sync_env, object_store, monkeypatch
):
    sandbox = start_sandbox()
    resources = shop(sandbox, sync_env, monkeypatch, lake_root="s3://faults/lake")
    code, output = meanwhile(
        ("push", "--types", *RECORDS),
        lambda: submissions(sandbox) >= 50,
        lambda _: object_store.stop(),  # the store goes away while the push sends
    )
    assert code == 1, output
    told(output, "FAILED push: ", "s3://faults/lake", "AWS_ENDPOINT_URL")
    assert "fault-test-secret" not in output

    object_store.start()
    code, output = run_here("push", "--types", *RECORDS)
    assert code == 0, output
    each_record_held_once(sandbox, resources)


def test_push_with_a_damaged_ledger_file_names_it_and_sends_nothing_until_a_person_decides(
    start_sandbox, sync_env, monkeypatch
):
    sandbox = start_sandbox()
    resources = shop(sandbox, sync_env, monkeypatch)
    assert run_here("push", "--types", *RECORDS)[0] == 0
    lake = Lake(os.environ["LAKE_ROOT"])
    ledger_file = lake.files(PUSHED)[0]
    damage(Path(ledger_file), "truncated")
    sent = submissions(sandbox)

    code, output = command("push", "--types", *RECORDS)
    assert code == 4 and submissions(sandbox) == sent  # Damaged: a person decides
    line = told(output, "FAILED push: the push ledger cannot be read", ledger_file)
    assert "LedgerDamaged" not in line and "Restore the file(s)" in line

    Path(ledger_file).rename(Path(os.environ["LAKE_ROOT"]).parent / "kept-aside.parquet")
    code, output = run_here("push", "--types", *RECORDS)
    assert code == 0, output
    for record_type in RECORDS:  # the hub holds the truth; the rows aside were sent again
        held_as_expected(sandbox, resources, record_type)


def test_a_receiver_on_a_damaged_inbox_says_so_in_one_line_and_a_new_one_serves(
    spawn_receiver, tmp_path
):
    inbox = tmp_path / "inbox.sqlite3"
    inbox.write_bytes(os.urandom(20_000))
    lake = Lake(tmp_path / "lake")
    env = {"WEBHOOK_SECRET": SECRET, "WEBHOOK_INBOX": str(inbox), "LAKE_ROOT": lake.root}
    refused = subprocess.run(
        [sys.executable, "-m", "pipelines.webhooks", "--port", "9"],
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 4 and "Traceback" not in refused.stderr  # Damaged
    [line] = refused.stderr.strip().splitlines()
    assert f"the webhook inbox at {inbox} (WEBHOOK_INBOX)" in line
    assert "The file is damaged: move it aside" in line and SECRET not in line

    inbox.rename(tmp_path / "inbox.damaged")  # as the line says
    serving = spawn_receiver(env)
    body = envelope(data={"line_uid": "U1"})
    answer = httpx.post(serving.url, content=body, headers=signed(body, "after-the-damage"))
    assert answer.status_code == 200
    serving.process.terminate()
    serving.process.wait(timeout=10)
    with Inbox(inbox) as fresh:
        assert compact(fresh, lake).rows == 1


def test_push_with_a_damaged_file_another_system_writes_names_it(
    start_sandbox, sync_env, monkeypatch
):
    sandbox = start_sandbox()
    shop(sandbox, sync_env, monkeypatch)
    orders = next(Path(os.environ["LAKE_ROOT"], "shop").glob("orders/*.parquet"))
    damage(orders, "truncated")

    code, output = command("push", "--types", *RECORDS)
    assert code == 1 and submissions(sandbox) == 0
    line = told(output, "FAILED push: the warehouse's views failed: ", str(orders))
    assert "have it written again" in line
