"""The live soak (bench/soak.py) over 4 simulated hours from 23:00 UTC today: it crosses a UTC
midnight and both daily schedules (23:30 data hub reports, 02:30 dimensions). Both plants are
made, so the checks are seen to catch them and nothing else. Hour 0's "materialize all" is the
UI's: the warehouse then holds every stream, and each check has one result per day of its run
in the backfill (one, for a check of a snapshot), none left planned. The sandbox's history is
on its last 11 days, the fewest plant (b) allows, and the partitions start there
(`--history-days 11`): the backfill lands every day that holds data, 12 partitions rather than
a year's 366, whose per-day check results were most of the test's time."""

from __future__ import annotations

import json
import subprocess
import sys

from bench.common import ROOT
from pipelines.registry import PULLED


def test_a_day_of_live_operation(tmp_path):
    out = tmp_path / "soak.json"
    # A process of its own: the soak moves its clock and imports the code location with
    # the sandbox's environment. Hour 0's materialize all is a backfill the webserver launches
    # and the daemon executes in runs of their own: a few minutes on a busy 2-core machine.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.soak",
            "--start-hour",
            "23",
            "--hours",
            "4",
            "--history-days",
            "11",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        # The bound only stops a soak that hangs: a busy machine took over 13 minutes with a
        # year of partitions.
        timeout=1800,
    )
    result = json.loads(out.read_text())
    assert result["runs_failed"] == []
    assert result["false_alarms"] == []
    assert all(plant["caught_by"] for plant in result["plants"].values()), result["plants"]
    assert all(stream["unequal"] == 0 for stream in result["closed_days"]), result["closed_days"]
    # Of the closed days compared, those of the history hold rows: 11 of trigger logs (the
    # start's day among them, closed at midnight), 12 of messages (the first one partial).
    assert all(s["closed_days_with_rows"] >= 11 for s in result["closed_days"]), result
    assert result["views_not_current_hours"] == []
    # The materialize all went through the webserver and the daemon, and finished.
    assert result["materialize_all"]["status"] == "COMPLETED_SUCCESS", result["materialize_all"]
    assert result["materialize_all"]["runs"] > 0
    # Every partition of the code location, which starts on the history's first day.
    assert result["materialize_all"]["partitions"] == 12, result["materialize_all"]
    # Then the warehouse holds every stream's relation, and each check of the code location has
    # one result per day of its run of the backfill (a check of a day-partitioned stream is
    # partitioned like it; one result for a snapshot's), none repeated and no day left
    # planned (the UI's "Skipped"): assets/checks.py, `each_day`.
    relations = set(result["materialize_all"]["warehouse_relations"])
    assert {stream.relation for stream in PULLED} <= relations, relations
    checks = result["materialize_all"]["checks"]
    assert checks and all(
        recorded["records_per_run"] == recorded["expected_per_run"]
        and recorded["records_per_run"]
        and recorded["planned_left"] == 0
        and recorded["repeated"] == 0
        for recorded in checks.values()
    ), checks
    # The day-partitioned streams' checks were run over days: more than one result per run.
    assert any(max(recorded["expected_per_run"]) > 1 for recorded in checks.values()), checks
    # An analyst held the warehouse throughout: read-only, then read-write.
    sessions = result["held_sessions"]
    assert len(sessions) == 2 and all(s["open"] for s in sessions.values()), sessions
    # The daily schedules ran, not only the hourly ones.
    runs = {run["run"].split()[0] for run in result["run_list"]}
    assert {"all_dimensions_daily", "datahub_daily_schedule"} <= runs, runs
    # And across a UTC midnight: scheduled runs ("<schedule> <date> <time>") of two dates.
    scheduled = [r["run"] for r in result["run_list"] if not r["run"].startswith("materialize")]
    assert len({label.split()[1] for label in scheduled}) == 2, scheduled
