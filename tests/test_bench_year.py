"""The year benchmark (bench/year.py) at its smallest: two points a day apart, one measured
hourly cycle each, a shop of 20 customers, one round of the pairs, the local lake. The
documented command runs as a user runs it, its data equal to the sandbox's truth, and the
second cycle sees an older, larger lake."""

from __future__ import annotations

import json
import subprocess
import sys

from bench.common import ROOT


def test_the_year_benchmark_measures_cycles_on_a_growing_lake(tmp_path):
    out = tmp_path / "year.json"
    subprocess.run(
        [
            *(sys.executable, "-m", "bench.year", "--points", "2", "--step-days", "1"),
            *("--cycles-per-point", "1", "--customers", "20", "--catch-up-hours", "24"),
            "--pairs",
            "1",
            *("--data", str(tmp_path / "data"), "--json", str(out)),
        ],
        cwd=ROOT,
        check=True,
        # Only stops a bench that hangs: a busy 2-core machine took minutes.
        timeout=900,
    )
    result = json.loads(out.read_text())
    first, second = result["rows"]
    assert (first["point"], second["point"]) == (0, 1)
    # The lake is a week old on its first day, the first point a day later.
    assert (first["age d"], second["age d"]) == (8, 9)
    assert first["files"] < second["files"]
    assert first["runs"] < second["runs"]  # a day of runs more in the history
    for row in (first, second):
        assert row["sent"] == 3  # the cycle's changed balances, and nothing else
        assert row["CPU s"] > 0 and row["peak MB"] > 0 and row["requests"] > 0
    assert [step["step"] for step in result["steps"]] == ["sync", "push", "compaction"] * 2
    assert result["correct"] is True, result["checks"]
    # The same commands on a copy of the first point's lake and on the last's, side by side.
    assert [row["command"] for row in result["pairs"]] == [
        "push",
        "compaction",
        "one-request sync",
    ]
    assert all(row["CPU s, week-old"] > 0 and row["CPU s, year-old"] > 0 for row in result["pairs"])
    assert all(stream["unequal"] == 0 for stream in result["checks"]["closed days"])
