"""The daily partitions follow the clock (assets/partitions.py): a code location loaded a year
from now shows the year the services then serve, not a wall of days they stopped serving."""

import os
import subprocess
import sys

from bench.common import ROOT

FIRST_PARTITION = (
    "import time_machine, datetime as dt\n"
    "with time_machine.travel(dt.datetime(2027, 11, 23, 12, tzinfo=dt.UTC), tick=False):\n"
    "    from assets.partitions import daily\n"
    "    keys = daily.get_partition_keys()\n"
    "    print(keys[0], keys[-1], len(keys))\n"
)


def printed(script: str, **env: str) -> str:
    """What `script` prints in a process of its own: `assets/partitions.py` computes its start
    once, when it is imported."""
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    ).stdout


def test_a_code_location_loaded_a_year_later_starts_a_year_later(monkeypatch):
    monkeypatch.delenv("SYNC_START_DATE", raising=False)
    answer = printed(FIRST_PARTITION).split()
    # 366 days up to and including today: the oldest a first sync reaches (messages).
    assert answer == ["2026-11-23", "2027-11-23", "366"]


def test_the_first_partition_is_overridable():
    script = "from assets.partitions import daily; print(daily.get_partition_keys()[0])"
    answer = printed(script, SYNC_START_DATE="2026-01-05").strip()
    assert answer == "2026-01-05"
