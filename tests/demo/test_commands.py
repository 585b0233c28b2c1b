"""`make demo` and `make dev` as the README gives them, run as the Makefile runs them
(`python -m demo`, `python -m demo.dev` with the instance settings of `dagster.yaml`)."""

import ast
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from assets import definitions

ROOT = Path(__file__).resolve().parents[2]
SECRET = "demo-test-signing-secret"
AGENT_TOKEN = "demo-test-agent-token"


def free_ports(count: int) -> int:
    """The first of `count` free ports in a row (the demo's receiver takes the next one)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        try:
            for port in range(first, first + count):
                with socket.socket() as taken:
                    taken.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise RuntimeError("no free ports in a row")


def test_make_demo_lands_every_relation_equal_to_the_truth_and_pushes_once(tmp_path):
    finished = subprocess.run(
        [sys.executable, "-m", "demo", "--port", str(free_ports(3)), "--data", str(tmp_path)],
        cwd=tmp_path,  # the demo names every path it writes; nothing lands in the checkout
        env=os.environ
        | {"WEBHOOK_SECRET": SECRET, "AGENT_TOKEN": AGENT_TOKEN, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = finished.stdout + finished.stderr
    assert finished.returncode == 0, output
    equal = {line.split()[0] for line in finished.stdout.splitlines() if line.endswith(" ok")}
    assert equal == {stream.relation for stream in definitions.STREAMS}, output
    assert "webhook events in datahub.webhook_events: {" in finished.stdout
    # Both pushes printed their figures: assignments reached the conversation service once
    # (the second push sent none); `sent` is the figures' last column but one.
    assignments = [
        line.split()
        for line in finished.stdout.splitlines()
        if line.startswith("conversation_assignment ")
    ]
    assert [int(row[-2].replace(",", "")) > 0 for row in assignments] == [True, False], output
    # The agent answered every turn the sandbox sent, each kept once; some from the orders.
    [line] = [x for x in finished.stdout.splitlines() if x.startswith("AI agent, in conversation")]
    agent = ast.literal_eval(line.partition(": ")[2])
    calls = agent["sandbox calls"]
    assert calls > 0 and agent["sandbox answered"] == agent["requests"] == agent["answers"] == calls
    assert 0 < agent["order answers"] == calls - agent["handovers"]
    assert "Traceback" not in output and SECRET not in output and AGENT_TOKEN not in output
    # It speaks for the product: Dagster's own lines are at most one in twenty.
    lines = output.splitlines()
    dagster = [line for line in lines if " - dagster - " in line]
    assert len(dagster) <= 0.05 * len(lines), "\n".join(dagster)
    # It ends with how to go on: its settings in a file, its sandbox's command, a command.
    settings = tmp_path / "settings.sh"
    *_, restart, source, command, said = finished.stdout.splitlines()
    assert source.split() == [".", str(settings)]
    assert said.startswith(f"{settings}: ") and "no secret" in said
    assert command.split()[:3] == [".venv/bin/python", "-m", "pipelines"]
    written = settings.read_text()
    assert SECRET not in written and AGENT_TOKEN not in written
    go_on_with(restart, settings)


def go_on_with(restart: str, settings: Path) -> None:
    """The demo's way to go on works: its sandbox started again with the command it printed,
    then `check`, with its settings sourced in a shell, finds every connection right."""
    program, *args = shlex.split(restart)
    assert program == ".venv/bin/python"
    sandbox = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        wait_for_sandbox(restart)
        env = {k: v for k, v in os.environ.items() if k not in ("WEBHOOK_SECRET", "AGENT_TOKEN")}
        checked = subprocess.run(
            ["sh", "-c", f". {shlex.quote(str(settings))} && {sys.executable} -m pipelines check"],
            cwd=ROOT,
            env=env | {"PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        sandbox.terminate()
        sandbox.wait(timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rows = checked.stdout.splitlines()
    # Each connection (two comment workspaces, both regions of the others) is right; the
    # receivers' rows only warn that their secrets are not set.
    connections = [row.split() for row in rows if " http://127.0.0.1:" in row]
    assert len(connections) == 6 and all(row[-1] == "ok" for row in connections), rows


def wait_for_sandbox(restart: str) -> None:
    """Until the sandbox the command starts answers."""
    args = shlex.split(restart)
    base = f"http://127.0.0.1:{args[args.index('--port') + 1]}"
    deadline = time.monotonic() + 120
    while True:
        try:
            httpx.get(f"{base}/_sandbox/clock", timeout=2).raise_for_status()
            return
        except httpx.HTTPError:
            assert time.monotonic() < deadline, f"the sandbox never answered at {base}"
            time.sleep(0.5)


def test_make_dev_serves_the_code_location_in_the_dagster_ui(tmp_path):
    home = tmp_path / "dagster"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")  # as `make dev` does
    sandbox_port, ui_port = free_ports(1), free_ports(1)
    dev = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "demo.dev",
            "--port",
            str(sandbox_port),
            "--ui-port",
            str(ui_port),
            "--data",
            str(tmp_path / "dev"),
        ],
        cwd=ROOT,
        env=os.environ | {"DAGSTER_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the UI's webserver, daemon and code server stop with it
    )
    query = "{ repositoriesOrError { ... on RepositoryConnection { nodes { jobs { name } } } } }"
    try:
        deadline = time.monotonic() + 240
        jobs: list[str] = []
        while not jobs:
            assert dev.poll() is None, dev.communicate()[0]
            assert time.monotonic() < deadline, "the UI never served the code location"
            try:
                answer = httpx.post(
                    f"http://127.0.0.1:{ui_port}/graphql", json={"query": query}, timeout=10
                ).json()
                nodes = answer["data"]["repositoriesOrError"]["nodes"]
                jobs = [job["name"] for node in nodes for job in node["jobs"]]
            except (httpx.HTTPError, KeyError, TypeError, ValueError):
                time.sleep(1)
    finally:
        os.killpg(dev.pid, signal.SIGTERM)
        try:
            dev.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait()
    assert {"push", "check_setup", "comment_dimensions"} <= set(jobs)
    assert (tmp_path / "dev" / "lake").is_dir()  # the demo's setup, not the checkout's
