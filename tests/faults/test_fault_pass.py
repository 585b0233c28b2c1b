"""The fault pass: each command run as a user runs it (`sync`, `push`, `warehouse`,
`check`, the webhook receiver) under each fault of its environment (a full disk, the object
store gone, a damaged file, a killed process) ends with one line naming the cause, with no
traceback, and the next run converges to the truth.

Cells whose fault needs a set-up of its own are tested beside their subject:
- sync, damaged file: tests/pipelines/test_damaged.py;
- sync, killed: tests/pipelines/test_sync.py (a sync killed half way and run again);
- push, killed: tests/push/test_push.py (ten kills at random points);
- receiver, full disk, killed, its shared store gone: tests/webhooks/test_receiver.py and
  tests/webhooks/test_shared_inbox.py.
"""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from pipelines.lake import Lake
from pipelines.landing import today
from pipelines.streams.comment import TRIGGER_LOGS
from tests.faults.conftest import command, told
from tests.pipelines.test_comment import workspace_id
from tests.pipelines.test_damaged import damage, landed_days

STREAMS = ("--streams", "accounts", "trigger_logs")


def truth_days(sandbox) -> dict[str, int]:
    truth = sandbox.truth_days("comment", workspace_id(sandbox), "trigger_logs")
    return {day: count for day, count in truth.items() if count}


def counted(output: str, relation: str) -> int:
    """A relation's row count from the table `sync` and `warehouse` print."""
    [line] = [line for line in output.splitlines() if line.startswith(f"{relation} ")]
    return int(line.split()[-1].replace(",", ""))


def test_sync_on_a_full_disk_names_the_lake_and_the_warehouse_then_converges(
    frozen_sandbox, sync_env
):
    sync_env(frozen_sandbox)
    lake_root, warehouse = os.environ["LAKE_ROOT"], os.environ["WAREHOUSE_PATH"]

    code, output = command("sync", *STREAMS, room=False)
    assert code == 1
    for stream in ("accounts", "trigger_logs"):
        told(output, f"FAILED comment__{stream}: comment.{stream}: 1 connection(s) failed")
    told(output, "- comment connection 'default'", f"LAKE_ROOT={lake_root}: its disk refused")
    told(output, "FAILED warehouse: ", f"WAREHOUSE_PATH={warehouse}: its disk refused")

    code, output = command("sync", *STREAMS)
    assert code == 0, output
    assert landed_days(Lake(lake_root)) == truth_days(frozen_sandbox)
    assert counted(output, "comment.trigger_logs") == sum(truth_days(frozen_sandbox).values())


def test_sync_with_the_store_gone_mid_run_names_the_store_then_converges(
    frozen_sandbox, sync_env, object_store, monkeypatch
):
    """Regression: `comment connection 'default' (http://…): OSError: When uploading object …
    AWS Error NETWORK_CONNECTION`, then an uncaught traceback from the warehouse's refresh."""
    sync_env(frozen_sandbox)
    monkeypatch.setenv("LAKE_ROOT", "s3://faults/lake")
    # Long enough that the store is stopped while the sync still lands.
    first = (today() - timedelta(days=20)).isoformat()
    args = ("--streams", "trigger_logs", "--start", first, "--end", today().isoformat())

    running = subprocess.Popen(
        [sys.executable, "-m", "pipelines", "sync", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not [f for f in object_store.files("faults") if f.endswith(".parquet")]:
            assert running.poll() is None, running.communicate()[0]
            assert time.monotonic() < deadline, "nothing landed"
            time.sleep(0.05)
        object_store.stop()  # the store goes away while the sync lands
        output, _ = running.communicate(timeout=600)
    finally:
        if running.poll() is None:
            running.kill()
    assert running.returncode == 1, output
    assert "fault-test-secret" not in output
    told(output, "FAILED comment__trigger_logs: comment.trigger_logs: 1 connection(s) failed")
    for cause in ("- comment connection 'default'", "FAILED warehouse: "):
        line = told(output, cause, "LAKE_ROOT=s3://faults/lake", "AWS_ENDPOINT_URL")
        assert f"nothing answers at {object_store.endpoint}" in line, line

    object_store.start()
    code, output = command("sync", *args)
    assert code == 0, output
    wanted = {day: n for day, n in truth_days(frozen_sandbox).items() if first <= day}
    assert landed_days(Lake("s3://faults/lake")) == wanted


def test_warehouse_on_a_full_disk_names_its_path_then_converges(frozen_sandbox, sync_env):
    sync_env(frozen_sandbox)
    assert command("sync", *STREAMS)[0] == 0
    warehouse = Path(os.environ["WAREHOUSE_PATH"])
    warehouse.unlink()  # a rebuild is due

    code, output = command("warehouse", room=False)
    assert code == 1
    line = told(output, "FAILED warehouse: ", f"WAREHOUSE_PATH={warehouse}: its disk refused")
    assert "free space there" in line and len(output.strip().splitlines()) == 1

    code, output = command("warehouse")
    assert code == 0, output
    assert counted(output, "comment.trigger_logs") == sum(truth_days(frozen_sandbox).values())


def test_warehouse_with_the_store_gone_names_the_store_then_converges(
    frozen_sandbox, sync_env, object_store, monkeypatch
):
    sync_env(frozen_sandbox)
    monkeypatch.setenv("LAKE_ROOT", "s3://faults/lake")
    assert command("sync", *STREAMS)[0] == 0
    Path(os.environ["WAREHOUSE_PATH"]).unlink()
    object_store.stop()

    code, output = command("warehouse")
    assert code != 0
    told(output, "s3://faults/lake", object_store.endpoint, "AWS_ENDPOINT_URL")
    assert len(output.strip().splitlines()) == 1 and "fault-test-secret" not in output

    object_store.start()
    code, output = command("warehouse")
    assert code == 0, output
    assert counted(output, "comment.trigger_logs") == sum(truth_days(frozen_sandbox).values())


def test_warehouse_killed_while_it_builds_leaves_nothing_and_the_next_converges(
    frozen_sandbox, sync_env
):
    sync_env(frozen_sandbox)
    assert command("sync", *STREAMS)[0] == 0
    warehouse = Path(os.environ["WAREHOUSE_PATH"])
    warehouse.unlink()  # a rebuild is due
    building = subprocess.Popen(
        [sys.executable, "-m", "pipelines", "warehouse"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(warehouse.parent.glob(f".{warehouse.name}.*.tmp")):
            assert building.poll() is None, "the build ended before its kill"
            assert time.monotonic() < deadline
            time.sleep(0.002)
    finally:
        building.send_signal(signal.SIGKILL)
        building.wait(timeout=30)
    assert list(warehouse.parent.glob(f".{warehouse.name}.*.tmp"))  # killed while it built

    code, output = command("warehouse")
    assert code == 0, output
    assert counted(output, "comment.trigger_logs") == sum(truth_days(frozen_sandbox).values())
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
    assert set(rows.values()) == {"ok"}
    told(output, "FAILED lake LAKE_ROOT: ", f"LAKE_ROOT={lake_root}: its disk refused a write")
    assert command("check")[0] == 0


def test_check_with_the_store_gone_names_it_and_checks_the_rest(
    frozen_sandbox, sync_env, object_store, monkeypatch
):
    sync_env(frozen_sandbox)
    monkeypatch.setenv("LAKE_ROOT", "s3://faults/lake")
    object_store.stop()

    code, output = command("check")
    assert code == 1
    rows = checked(output)
    assert rows.pop("lake LAKE_ROOT") == "FAILED" and "ok" in rows.values()
    told(output, "FAILED lake LAKE_ROOT: ", object_store.endpoint, "AWS_ENDPOINT_URL")

    object_store.start()
    assert command("check")[0] == 0


def test_check_warns_of_a_damaged_file_set_aside_until_someone_deletes_it(frozen_sandbox, sync_env):
    sync_env(frozen_sandbox)
    assert command("sync", *STREAMS)[0] == 0
    lake = Lake(os.environ["LAKE_ROOT"])
    damage(Path(lake.files(TRIGGER_LOGS)[-1]), "truncated")
    assert command("sync", *STREAMS)[0] == 0  # sets it aside, lands it again

    code, output = command("check")
    assert code == 0  # a warning: the day landed again
    assert checked(output)["lake LAKE_ROOT"] == "WARN"
    line = told(output, "WARN lake LAKE_ROOT: 1 damaged file(s) set aside in ")
    assert ".reason.txt" in line
    for kept in Path(lake.root, "_damaged").rglob("*.parquet.*"):
        kept.unlink()
    assert checked(command("check")[1])["lake LAKE_ROOT"] == "ok"


def test_check_killed_leaves_nothing_in_the_lake(frozen_sandbox, sync_env):
    sync_env(frozen_sandbox)
    lake_root = Path(os.environ["LAKE_ROOT"])
    for kill_after in (0.5, 1.0, 1.5, 2.0):
        checking = subprocess.Popen(
            [sys.executable, "-m", "pipelines", "check"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(kill_after)
        checking.send_signal(signal.SIGKILL)
        checking.wait(timeout=30)
    assert command("check")[0] == 0
    assert [p.name for p in lake_root.glob(".check*")] == []
