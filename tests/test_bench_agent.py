"""The agent benchmark (bench/agent.py) on a few turns, with the demo's reply function: every
turn answered and stored once, the figures sane."""

from __future__ import annotations

import json
import subprocess
import sys

from bench.common import ROOT


def test_the_agent_benchmark_answers_every_turn(tmp_path):
    out = tmp_path / "agent.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.agent",
            "--requests",
            "60",
            "--warmup",
            "10",
            "--reply",
            "demo.agent:reply",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    result = json.loads(out.read_text())
    row = result["rows"][0]
    assert (row["reply"], row["concurrency"], row["requests"]) == ("demo.agent:reply", 20, 60)
    assert 0 < row["p50 ms"] <= row["p99 ms"] <= row["max ms"]
    assert result["checked"] == {"inbox_requests": 70, "outcomes": {"replied": 70}}
