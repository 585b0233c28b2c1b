"""The data hub pull pipeline against the real sandbox: both regions land exactly the ground
truth, re-runs replace, faults change nothing, and the export task's limits hold."""

from __future__ import annotations

import shutil
import time
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import pyarrow.parquet as pq
import pytest

from assets.datahub import (
    ASSETS,
    CHECKS,
    members_equal_export_row_count,
    one_report_per_broadcast,
)
from assets.resources import LakeResource
from pipelines.clients.datahub import DataHub
from pipelines.lake import Lake
from pipelines.pull.landing import today
from pipelines.registry import WAREHOUSE_STREAMS
from pipelines.streams.datahub import BROADCAST_REPORTS, BROADCASTS, MEMBERS, STREAMS
from pipelines.warehouse import SQL_DIR, Warehouse
from sandbox.faults import FaultSpec
from tests.figures import run_figures
from tests.pipelines.conftest import APIKEY

REGIONS = ("default", "jp")
MOUNTS = {"default": "/datahub", "jp": "/datahub-jp"}
#: stream -> the column that holds the id `/_sandbox/truth/.../ids` lists: its key's last
#: column. Every stream the service declares is compared with the sandbox's truth.
ID_COLUMNS = {stream.name: stream.key[-1] for stream in STREAMS}

custom_fields, broadcasts, broadcast_reports, members = (
    ASSETS[name] for name in ("custom_fields", "broadcasts", "broadcast_reports", "members")
)


def materialize(resources: dict, selection=None, **options) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        selection or [*ASSETS.values(), *CHECKS],
        resources=resources,
        **options,
    )


def sync_everything(resources: dict) -> dg.ExecuteInProcessResult:
    """Every asset and check; broadcast_reports for today's partition."""
    return materialize(resources, partition_key=today().isoformat())


def warehouse(resources: dict, tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """The data hub's views over the lake, opened read-only like an analyst would."""
    sql = tmp_path / "sql"
    shutil.copytree(SQL_DIR / "datahub", sql / "datahub", dirs_exist_ok=True)
    lake = resources["lake"]
    path = Path(lake.warehouse_path)
    Warehouse(path, lake.lake(), WAREHOUSE_STREAMS, sql_dir=sql).refresh()
    return duckdb.connect(str(path), read_only=True)


def landed_ids(con: duckdb.DuckDBPyConnection, stream: str, region: str) -> list:
    column = ID_COLUMNS[stream]
    query = f"SELECT {column} FROM datahub.{stream} WHERE connection = ?"
    return [row[0] for row in con.execute(query, [region]).fetchall()]


def assert_equals_truth(sandbox, con: duckdb.DuckDBPyConnection) -> None:
    truth = sandbox.truth()["datahub"]
    for region in REGIONS:
        for stream in ID_COLUMNS:
            ids = landed_ids(con, stream, region)
            assert len(ids) == truth[region][stream], (region, stream)
            assert sorted(ids) == sorted(sandbox.truth_ids("datahub", region, stream)), (
                region,
                stream,
            )


def assert_checks_passed(result: dg.ExecuteInProcessResult) -> None:
    evaluations = result.get_asset_check_evaluations()
    assert len(evaluations) == len(CHECKS)
    failed = [(e.asset_key.to_user_string(), e.check_name) for e in evaluations if not e.passed]
    assert failed == []


def wait_task(sandbox, task: dict) -> dict:
    for _ in range(200):
        if task["status"] == "success":
            return task
        time.sleep(0.05)
        task = httpx.get(
            f"{sandbox.url}/datahub/task/{task['id']}", headers={"apikey": APIKEY}
        ).json()
    raise AssertionError(f"task {task['id']} did not finish")


def rows_of_day(lake: Lake, day: date) -> dict[tuple[str, int], dict]:
    found = {}
    for connection in REGIONS:
        path = lake.path(BROADCAST_REPORTS, connection, day)
        for row in pq.read_table(path).to_pylist():
            found[(row["connection"], row["broadcast_id"])] = row
    return found


def test_every_stream_equals_the_truth_in_both_regions(frozen_sandbox, sync_env, tmp_path):
    resources = sync_env(frozen_sandbox)
    result = sync_everything(resources)

    assert result.success
    assert_checks_passed(result)
    con = warehouse(resources, tmp_path)
    assert_equals_truth(frozen_sandbox, con)
    metadata = run_figures(result)
    for stream in ID_COLUMNS:
        assert {"rows", "requests", "429s", "retries"} <= set(metadata[stream]), stream
    # Options: one view row per option of the service's single_select fields.
    for region in REGIONS:
        listed = httpx.get(
            f"{frozen_sandbox.url}{MOUNTS[region]}/cdh/v1/custom-fields/",
            headers={"apikey": APIKEY},
        ).json()
        options = sorted(o["id"] for field in listed for o in field["options"] or [])
        query = "SELECT id FROM datahub.custom_field_options WHERE connection = ? ORDER BY id"
        assert [row[0] for row in con.execute(query, [region]).fetchall()] == options
        archived = "SELECT count(*) FROM datahub.custom_fields WHERE connection = ? AND NOT active"
        assert con.execute(archived, [region]).fetchall()[0][0] > 0


def test_running_twice_leaves_no_duplicate(frozen_sandbox, sync_env, tmp_path):
    resources = sync_env(frozen_sandbox)
    assert sync_everything(resources).success
    second = sync_everything(resources)

    assert second.success
    assert_checks_passed(second)
    con = warehouse(resources, tmp_path)
    assert_equals_truth(frozen_sandbox, con)
    broadcasts_total = sum(frozen_sandbox.truth()["datahub"][r]["broadcasts"] for r in REGIONS)
    history = con.execute("SELECT count(*) FROM datahub.broadcast_report_history").fetchall()
    assert history[0][0] == broadcasts_total
    lake = resources["lake"].lake()
    for stream in STREAMS:
        assert len(lake.files(stream)) == len(REGIONS), stream.name
    assert lake.sweep_temporary() == 0


def test_injected_faults_leave_the_result_exact(start_sandbox, sync_env, tmp_path):
    sandbox = start_sandbox(faults=FaultSpec(error=0.1, rate=0.05, truncate=0.05, drop=0.05))
    resources = sync_env(sandbox)

    result = sync_everything(resources)

    assert result.success
    assert_checks_passed(result)
    assert_equals_truth(sandbox, warehouse(resources, tmp_path))
    metadata = run_figures(result)
    assert sum(m["retries"] for m in metadata.values()) > 0


def test_export_deadline_says_which_task_timed_out(start_sandbox, sync_env):
    sandbox = start_sandbox(task_phase_seconds=30)
    toml = "[service.datahub]\npace = false\nexport_deadline_seconds = 0.5\n"
    resources = sync_env(sandbox, pace=True, sync_toml=toml)

    started = time.monotonic()
    with pytest.raises(dg.Failure) as failure:
        materialize(resources, [members])

    assert time.monotonic() - started < 10
    message = str(failure.value)
    assert "members export of connection 'default'" in message
    assert "export_deadline_seconds" in message
    assert "(status 'pending')" in message and "deadline of 0.5 s" in message
    assert APIKEY not in message
    assert resources["lake"].lake().files(MEMBERS) == []


def test_members_file_that_misses_announced_rows_does_not_land(start_sandbox, sync_env):
    """An export file whose rows differ from its task's row_count fails the run, nothing lands."""
    sandbox = start_sandbox()
    headers = {"apikey": APIKEY}
    base = f"{sandbox.url}/datahub"
    old = wait_task(sandbox, httpx.post(f"{base}/v1/members/export", headers=headers).json())
    # One more member: the next export announces one row more than the old file holds.
    body = {"import_key": "display_email", "data": [{"display_email": "new.member@example.com"}]}
    wait_task(sandbox, httpx.post(f"{base}/v1/members/import", headers=headers, json=body).json())
    toml = f'[paths.datahub]\ndownload_member_export = "/v1/members/export/{old["id"]}/file"\n'
    resources = sync_env(sandbox, sync_toml=toml)

    with pytest.raises(dg.Failure, match=r"held 1500 rows, the task announced row_count 1501"):
        materialize(resources, [members])

    assert resources["lake"].lake().files(MEMBERS) == []


def test_paths_from_sync_toml_replace_the_table(frozen_sandbox, sync_env):
    toml = '[paths.datahub]\nlist_broadcasts = "/v1/moved/broadcasts"\n'
    resources = sync_env(frozen_sandbox, sync_toml=toml)

    with pytest.raises(dg.Failure, match=r"GET /v1/moved/broadcasts answered 404"):
        materialize(resources, [broadcasts])
    # Operations the file does not name keep the table's path.
    assert materialize(resources, [custom_fields]).success


def test_a_misspelt_operation_in_paths_is_refused():
    with pytest.raises(ValueError, match=r"unknown operations \['list_broadcast'\]"):
        DataHub(connections=[], paths={"list_broadcast": "/v1/broadcasts"})


def test_daily_snapshots_repull_only_open_broadcasts(frozen_sandbox, sync_env, tmp_path):
    resources = sync_env(frozen_sandbox)
    lake = resources["lake"].lake()
    day = today()
    first, second = day - timedelta(days=2), day - timedelta(days=1)
    assert materialize(resources, [broadcasts]).success
    backfill = {
        "dagster/asset_partition_range_start": first.isoformat(),
        "dagster/asset_partition_range_end": second.isoformat(),
    }
    assert materialize(resources, [broadcast_reports], tags=backfill).success
    result = materialize(resources, [broadcast_reports], partition_key=str(day))
    assert result.success

    listed = {
        (row["connection"], row["id"]): row
        for row in pq.read_table(lake.stream_dir(BROADCASTS)).to_pylist()
    }
    snapshots = {d: rows_of_day(lake, d) for d in (first, second, day)}
    closed = {
        key
        for key, row in listed.items()
        if (second - row["sent_date"].date()).days >= 60 and row["created_at"].date() <= first
    }
    assert closed, "the sandbox has broadcasts past their 60-day window"
    # The first day of the range takes every broadcast that existed; later days only the
    # ones whose figures can still change.
    existing = {k for k, row in listed.items() if row["created_at"].date() <= first}
    assert set(snapshots[first]) == existing
    for later in (second, day):
        assert not closed & set(snapshots[later])
    for snapshot_day, rows in snapshots.items():
        for key, row in rows.items():
            sent_day = listed[key]["sent_date"].date()
            if sent_day > snapshot_day:
                assert (row["start_date"], row["end_date"]) == (snapshot_day, snapshot_day)
                assert (row["sent"], row["open_count"], row["clicks"]) == (0, 0, 0)
            else:
                assert row["start_date"] == sent_day
                assert row["end_date"] == min(sent_day + timedelta(days=59), snapshot_day)
    # Today's run asks for one list per region and one report per snapshot it takes.
    metadata = run_figures(result)["broadcast_reports"]
    assert metadata["requests"] == len(REGIONS) + len(snapshots[day])
    # The view shows each broadcast's latest snapshot: today's if open, else the first day's.
    con = warehouse(resources, tmp_path)
    latest = {
        (connection, broadcast_id): taken
        for connection, broadcast_id, taken in con.execute(
            "SELECT connection, broadcast_id, date FROM datahub.broadcast_reports"
        ).fetchall()
    }
    assert set(latest) == set(listed)
    assert all(latest[key] == first for key in closed)
    assert all(latest[key] == day for key in snapshots[day])


DAY = date(2026, 3, 31)


def test_checks_fail_on_a_lake_that_disagrees(tmp_path):
    lake = Lake(tmp_path)
    resource = LakeResource(lake_root=str(tmp_path))
    member = dict.fromkeys(MEMBERS.schema.names) | {"member_id": 1, "connection": "default"}
    lake.write(MEMBERS, "default", [member], day=DAY, metadata={"export_row_count": "2"})
    assert not members_equal_export_row_count(lake=resource).passed

    broadcast = dict.fromkeys(BROADCASTS.schema.names) | {"id": 7, "connection": "default"}
    pulled = {"pulled_at": "2026-03-31T10:00:00+00:00"}
    lake.write(BROADCASTS, "default", [broadcast], metadata=pulled)
    assert not one_report_per_broadcast(lake=resource).passed
    report = dict.fromkeys(BROADCAST_REPORTS.schema.names) | {
        "broadcast_id": 7,
        "connection": "default",
    }
    lake.write(BROADCAST_REPORTS, "default", [report], day=DAY, metadata=pulled)
    assert one_report_per_broadcast(lake=resource).passed
