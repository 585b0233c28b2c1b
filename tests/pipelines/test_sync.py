"""`python -m cli sync` as a user runs it: everything, exact, restartable, and never in
an analyst's way."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from assets import definitions
from pipelines.lake import Lake
from pipelines.settings import load_settings
from pipelines.warehouse.reconcile import reconcile
from tests.pipelines.test_comment import workspace_id
from tests.pipelines.test_warehouse import held_session


def sync(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cli", "sync", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ.copy(),
    )


def finished(process: subprocess.Popen) -> str:
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output
    return output


def assert_equals_truth(sandbox) -> None:
    settings = load_settings()
    rows = reconcile(
        Lake(settings.lake_root), str(settings.warehouse_path), definitions.STREAMS, sandbox.truth()
    )
    assert [r for r in rows if not r.equal] == []
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        for stream in definitions.STREAMS:
            key = ", ".join(["connection", *stream.key])
            [(total, distinct)] = con.execute(
                f"SELECT count(*), count(DISTINCT ({key})) FROM {stream.relation}"
            ).fetchall()
            assert total == distinct, f"{stream.relation} holds a row twice"
            # What the sandbox sends matches every declared schema: no false drift.
            [(drifted,)] = con.execute(f"SELECT count(_extra) FROM {stream.relation}").fetchall()
            assert drifted == 0, f"{stream.relation}: drift reported on healthy data"


def test_a_sync_killed_half_way_and_run_again_is_exact(frozen_sandbox, sync_env, tmp_path):
    sync_env(frozen_sandbox)
    lake = Path(os.environ["LAKE_ROOT"])
    killed = sync()
    deadline = time.monotonic() + 120
    while not list(lake.glob("comment/trigger_logs/*/*.parquet")):
        assert killed.poll() is None, killed.communicate()[0]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)

    # Nothing half-written is visible: temporary files are hidden from every reader's glob.
    for path in lake.rglob("*.parquet"):
        assert not path.name.startswith(".")
    output = finished(sync())
    assert "FAILED" not in output
    assert not list(lake.rglob("*.tmp")), "a killed run's temporary files were left"
    assert_equals_truth(frozen_sandbox)


def test_two_syncs_of_one_lake_at_once_are_exact(frozen_sandbox, sync_env):
    """A schedule's sync beside one started by hand, 1.5 s apart: each writes whole files
    under new names and renames them into place, so both end well and every relation holds
    each row once, equal to the truth."""
    sync_env(frozen_sandbox)
    first = sync()
    time.sleep(1.5)
    second = sync()
    for output in (finished(first), finished(second)):
        assert "FAILED" not in output
    assert_equals_truth(frozen_sandbox)
    # Both syncs are in the history, each stream once per sync, said as the command line's.
    with duckdb.connect(str(load_settings().warehouse_path), read_only=True) as con:
        runs = con.execute(
            "SELECT relation, count(DISTINCT run_id), list(DISTINCT started_by), "
            "list(DISTINCT outcome) FROM sync.runs GROUP BY relation"
        ).fetchall()
    assert sorted(runs) == sorted(
        (stream.relation, 2, ["command line"], ["succeeded"]) for stream in definitions.STREAMS
    )


def test_the_warehouse_command_rebuilds_the_views_of_an_empty_lake_and_a_synced_one(
    frozen_sandbox, sync_env
):
    """`python -m cli warehouse`, as the README gives it. Regression: it always ended
    in an AttributeError (the sync's `--start` was read for every command)."""
    sync_env(frozen_sandbox)

    def warehouse() -> str:
        done = subprocess.run(
            [sys.executable, "-m", "cli", "warehouse"],
            capture_output=True,
            text=True,
            env=os.environ.copy(),
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        return done.stdout

    assert "warehouse: " in warehouse()
    finished(sync("--streams", "comment.accounts"))
    accounts = frozen_sandbox.truth()["comment"][workspace_id(frozen_sandbox)]["accounts"]
    counts = dict(line.split() for line in warehouse().splitlines() if len(line.split()) == 2)
    assert int(counts["comment.accounts"].replace(",", "")) == accounts > 0


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "read-write"])
def test_an_analysts_session_stays_open_through_syncs_and_the_views_are_current(
    frozen_sandbox, sync_env, read_only
):
    """Regression: with a session open, a stream's first file left its view empty (the sync
    said the views "could not be updated", printed 0 rows and exited 0); with a read-write
    one, printing the counts crashed on DuckDB's lock."""
    sync_env(frozen_sandbox)
    finished(sync("--streams", "comment"))
    warehouse = os.environ["WAREHOUSE_PATH"]
    analyst = duckdb.connect(warehouse, read_only=read_only)  # the sync runs in another process
    try:
        before = analyst.execute("SELECT count(*) FROM comment.trigger_logs").fetchall()[0][0]
        # channels land their first file, so their view is due while the analyst holds the file
        output = finished(sync("--streams", "channels"))
        assert "FAILED" not in output and "views rewritten" in output
        # The table's row (each connection's landing is said on a line of its own too).
        [printed] = [
            row[1]
            for row in map(str.split, output.splitlines())
            if row[:1] == ["conversation.channels"] and len(row) == 2
        ]
        assert int(printed.replace(",", "")) > 0  # counted in the new file
        after = analyst.execute("SELECT count(*) FROM comment.trigger_logs").fetchall()[0][0]
        assert after == before > 0  # the session keeps its file until it reconnects
    finally:
        analyst.close()
    settings = load_settings()
    synced = [s for s in definitions.STREAMS if s.service == "comment" or s.name == "channels"]
    rows = reconcile(
        Lake(settings.lake_root), str(settings.warehouse_path), synced, frozen_sandbox.truth()
    )
    assert [r for r in rows if not r.equal] == []


def test_unknown_stream_names_are_refused_with_the_closest_known_ones(frozen_sandbox, sync_env):
    sync_env(frozen_sandbox)
    process = sync("--streams", "trigger_log")
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 2
    assert "no stream is named 'trigger_log' (did you mean trigger_logs" in output
    assert "comment.trigger_logs" in output


def test_a_sync_whose_views_cannot_be_rewritten_lands_its_data_and_fails_saying_why(
    frozen_sandbox, sync_env
):
    """An analyst's unsaved changes hold the warehouse: the streams still land, and the sync
    exits 3 (`Busy`: run again once the session is closed) naming the warehouse and what to
    do, instead of a green light over stale views."""
    sync_env(frozen_sandbox)
    finished(sync("--streams", "workspace"))
    warehouse = Path(os.environ["WAREHOUSE_PATH"])
    with held_session(warehouse, False, "CREATE TABLE main.notes AS SELECT 1 AS n"):
        process = sync("--streams", "channels")
        output, _ = process.communicate(timeout=300)
    assert process.returncode == 3, output
    assert "FAILED warehouse:" in output and "cli warehouse" in output, output
    assert list(Path(os.environ["LAKE_ROOT"]).glob("conversation/channels/*.parquet"))
