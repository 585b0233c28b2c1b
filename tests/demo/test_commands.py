"""`make demo` and `make dev` as the README gives them, run as the Makefile runs them
(`python -m demo`, `python -m demo.dev`)."""

import ast
import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb
import httpx
import yaml

from assets import definitions
from demo.shop import ORDERS
from pipelines.lake import Lake
from pipelines.push.ledger import rejected_now

ROOT = Path(__file__).resolve().parents[2]
SECRET = "demo-test-signing-secret"
AGENT_TOKEN = "demo-test-agent-token"


def as_a_user(*unset: str) -> dict[str, str]:
    """This process's environment without `unset`, nor the partitions' start the tests set for
    themselves (tests/conftest.py): the demo lands a year, as a user's does."""
    return {k: v for k, v in os.environ.items() if k not in {"SYNC_START_DATE", *unset}}


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
        env=as_a_user()
        | {"WEBHOOK_SECRET": SECRET, "AGENT_TOKEN": AGENT_TOKEN, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = finished.stdout + finished.stderr
    assert finished.returncode == 0, output
    equal = {line.split()[0] for line in finished.stdout.splitlines() if line.endswith(" ok")}
    assert equal == {stream.relation for stream in definitions.STREAMS}, output
    # Every webhook event the sandbox delivered (the push's `*.sync` events, the campaign's)
    # landed in the warehouse once: the same figures per family.
    [landed] = [x for x in finished.stdout.splitlines() if x.startswith("webhook events in ")]
    [sent] = [x for x in finished.stdout.splitlines() if x.startswith("webhook events the ")]
    landed, sent = (ast.literal_eval(x.partition(": ")[2].strip()) for x in (landed, sent))
    assert landed == sent and sent["order"] > 0 and sent["message"] > 0, output
    # Both pushes printed their figures: assignments reached the conversation service once
    # (the second push sent none); then the agent's routed handovers went as assignments.
    # `sent` is the figures' last column but one.
    assignments = [
        line.split()
        for line in finished.stdout.splitlines()
        if line.startswith("conversation_assignment ")
    ]
    sent = [int(row[-2].replace(",", "")) for row in assignments]
    assert [count > 0 for count in sent] == [True, False, True], output
    # The example activity kept as code is planned as a create in the default workspace.
    planned = [line.split() for line in finished.stdout.splitlines() if "'Winter sale DM'" in line]
    assert [row[0] for row in planned] == ["create"], output
    # The agent answered every turn the sandbox sent, each kept once; some from the orders.
    [line] = [x for x in finished.stdout.splitlines() if x.startswith("AI agent, in conversation")]
    agent = ast.literal_eval(line.partition(": ")[2])
    calls = agent["sandbox calls"]
    assert calls > 0 and agent["sandbox answered"] == agent["requests"] == agent["answers"] == calls
    assert 0 < agent["order answers"] == calls - agent["handovers"]
    # Returns were routed to their region's team, and each routed member assigned once.
    assert 0 < sent[2] <= agent["assigned"] <= agent["routed to a team"] < agent["handovers"]
    assert "Traceback" not in output and SECRET not in output and AGENT_TOKEN not in output
    # No library's report at exit (DuckDB's bindings list each object alive at teardown).
    assert "nanobind" not in output and "leaked" not in output, output[-3000:]
    # It speaks for the product: Dagster's own lines are at most one in twenty.
    lines = output.splitlines()
    dagster = [line for line in lines if " - dagster - " in line]
    assert len(dagster) <= 0.05 * len(lines), "\n".join(dagster)
    # It ends with how to go on: its settings in a file, its sandbox's command, a command.
    settings = tmp_path / "settings.sh"
    *_, restart, source, command, said = finished.stdout.splitlines()
    assert source.split() == [".", str(settings)]
    assert said.startswith(f"{settings}: ") and "no secret" in said
    assert command.split()[:3] == [".venv/bin/python", "-m", "cli"]
    written = settings.read_text()
    assert SECRET not in written and AGENT_TOKEN not in written
    go_on_with(restart, settings, tmp_path / "warehouse.duckdb")


def go_on_with(restart: str, settings: Path, warehouse: Path) -> None:
    """The demo's way to go on works: its sandbox started again with the command it printed
    serves the data the demo's warehouse holds (its anchor is pinned), and `check`, with its
    settings sourced in a shell, finds every connection right."""
    program, *args = shlex.split(restart)
    assert program == ".venv/bin/python"
    sandbox = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        base = wait_for_sandbox(restart)
        with duckdb.connect(str(warehouse), read_only=True) as con:
            workspaces = [row[0] for row in con.sql("SELECT id FROM comment.workspace").fetchall()]
            landed = dict(
                con.sql(
                    "SELECT strftime(date, '%Y-%m-%d'), count(*) FROM comment.trigger_logs "
                    "GROUP BY ALL"
                ).fetchall()
            )
        served: Counter = Counter()
        for workspace in workspaces:
            url = f"{base}/_sandbox/truth/comment/{workspace}/trigger_logs/days"
            served.update(httpx.get(url, timeout=30).json()["days"])
        assert len(workspaces) == 2 and sum(landed.values()) > 0
        assert {day: n for day, n in served.items() if n} == landed
        env = as_a_user("WEBHOOK_SECRET", "AGENT_TOKEN")
        checked = subprocess.run(
            ["sh", "-c", f". {shlex.quote(str(settings))} && {sys.executable} -m cli check"],
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


def wait_for_sandbox(restart: str) -> str:
    """Until the sandbox the command starts answers; its base URL."""
    args = shlex.split(restart)
    base = f"http://127.0.0.1:{args[args.index('--port') + 1]}"
    deadline = time.monotonic() + 120
    while True:
        try:
            httpx.get(f"{base}/_sandbox/clock", timeout=2).raise_for_status()
            return base
        except httpx.HTTPError:
            assert time.monotonic() < deadline, f"the sandbox never answered at {base}"
            time.sleep(0.5)


def process_state(pid: int) -> tuple[str, str] | None:
    """A process's state letter and start time (`/proc/<pid>/stat`), None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0], fields[19]


def descendants(pid: int) -> dict[int, tuple[str, str]]:
    """Every process under `pid`, however deep (`ps`): its start time (so a process id used
    again is not taken for it) and command line."""
    listed = subprocess.run(
        ["ps", "-e", "-o", "pid=,ppid=,args="], capture_output=True, text=True, check=True
    ).stdout
    children: dict[int, list[tuple[int, str]]] = {}
    for line in listed.splitlines():
        child, parent, args = line.split(None, 2)
        children.setdefault(int(parent), []).append((int(child), args))
    found, todo = {}, [pid]
    while todo:
        for child, args in children.get(todo.pop(), []):
            state = process_state(child)
            if state is not None:
                found[child] = (state[1], args)
            todo.append(child)
    return found


def alive(pid: int, started: str) -> bool:
    """The process that started then still runs (a zombie has ended, only not been reaped)."""
    state = process_state(pid)
    return state is not None and state[1] == started and state[0] != "Z"


JOBS = "{ repositoriesOrError { ... on RepositoryConnection { nodes { jobs { name } } } } }"


def graphql(ui: str, query: str) -> dict:
    return httpx.post(f"{ui}/graphql", json={"query": query}, timeout=10).json()["data"]


def latest_rows(ui: str, *key: str) -> int:
    """The `rows` of the asset's newest materialization in the UI's instance (0: none yet)."""
    path = ", ".join(f'"{part}"' for part in key)
    answer = graphql(
        ui,
        f"{{ assetOrError(assetKey: {{path: [{path}]}}) {{ ... on Asset {{ "
        "assetMaterializations(limit: 1) { metadataEntries { label "
        "... on IntMetadataEntry { intValue } } } } } }",
    )
    materializations = (answer.get("assetOrError") or {}).get("assetMaterializations") or []
    entries = materializations[0]["metadataEntries"] if materializations else []
    return next((e["intValue"] for e in entries if e["label"] == "rows"), 0)


LOCATION = "{ repositoriesOrError { ... on RepositoryConnection { nodes { location { name } } } } }"
LAUNCH = """mutation($params: ExecutionParams!) {
  launchPipelineExecution(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } } }"""
RUN = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status jobName } } }"
NEWEST = """query($path: [String!]!) { assetOrError(assetKey: {path: $path}) { ... on Asset {
  assetMaterializations(limit: 1) { runId metadataEntries { label
    ... on IntMetadataEntry { intValue }
    ... on TableMetadataEntry { table { records } } } } } } }"""
PARTITION = """query($repo: RepositorySelector!, $set: String!, $name: String!) {
  partitionSetOrError(repositorySelector: $repo, partitionSetName: $set) { ... on PartitionSet {
    partition(partitionName: $name) {
      runConfigOrError { ... on PartitionRunConfig { yaml } }
      tagsOrError { ... on PartitionTags { results { key value } } } } } } }"""


def graphql_with(ui: str, query: str, **variables) -> dict:
    answer = httpx.post(
        f"{ui}/graphql", json={"query": query, "variables": variables}, timeout=60
    ).json()
    assert "errors" not in answer, answer
    return answer["data"]


def repository(ui: str) -> dict[str, str]:
    [node] = graphql(ui, LOCATION)["repositoriesOrError"]["nodes"]
    return {"repositoryLocationName": node["location"]["name"], "repositoryName": "__repository__"}


def launched(ui: str, job: str, config: dict, assets=(), tags=()) -> tuple[str, str]:
    """A run launched as the UI launches it (its launchpad, or an asset page's "Materialize":
    Dagster's asset job with the page's assets), waited for: its id and how it ended."""
    selector = repository(ui) | {"jobName": job}
    if assets:
        selector["assetSelection"] = [{"path": key.split("/")} for key in assets]
    params = {
        "selector": selector,
        "runConfigData": config,
        "executionMetadata": {"tags": list(tags)},
    }
    launch = graphql_with(ui, LAUNCH, params=params)["launchPipelineExecution"]
    assert launch["__typename"] == "LaunchRunSuccess", launch
    run_id = launch["run"]["runId"]
    deadline = time.monotonic() + 600
    while (status := graphql_with(ui, RUN, id=run_id)["runOrError"]["status"]) not in {
        "SUCCESS",
        "FAILURE",
        "CANCELED",
    }:
        assert time.monotonic() < deadline, f"run {run_id} of {job} still {status}"
        time.sleep(2)
    return run_id, status


def newest(ui: str, key: str) -> tuple[str, dict]:
    """The asset's newest materialization in the UI: its run and its metadata by label."""
    answer = graphql_with(ui, NEWEST, path=key.split("/"))["assetOrError"]
    [materialization] = answer["assetMaterializations"]
    metadata = {
        entry["label"]: entry.get("intValue", entry.get("table"))
        for entry in materialization["metadataEntries"]
    }
    return materialization["runId"], metadata


def rejected_sources(data: Path, record_type: str) -> dict[str, set[str]]:
    """`sync.rejected` of the record type, as the lake holds it: key -> its sources."""
    found: dict[str, set[str]] = {}
    for row in rejected_now(Lake(data / "lake"), record_type, 10_000):
        found.setdefault(row["key"], set()).add(row["source"])
    return found


def an_order_sent_as_it_is(data: Path) -> str:
    """An order of the dev's shop that validation passes: one version, of the shop's
    currency (the broken ones are `O-BROKEN-*`, conflicts have two versions)."""
    lake = Lake(data / "lake")
    [path] = lake.files(ORDERS)
    with duckdb.connect() as con:
        [(key,)] = con.execute(
            "SELECT min(id) FROM (SELECT id FROM read_parquet(?) WHERE id LIKE 'O1%' "
            "AND currency = 'TWD' GROUP BY id HAVING count(*) = 1)",
            [lake.uri(path)],
        ).fetchall()
    return key


def pushes_and_rejects_from_the_record_types_page(base: str, ui: str, data: Path) -> str:
    """ "Materialize" on `datahub/records/order` (and the write-back's
    `conversation/records/conversation_close`) pushes those record types: the orders reach
    the sandbox, the shop's broken ones are rejected, and one the hub refuses is in
    `sync.rejected` as the service's refusal. The refused order's key."""
    refused = an_order_sent_as_it_is(data)
    httpx.put(
        f"{base}/_sandbox/datahub/default/records/order/refused",
        json={"keys": [refused]},
        timeout=30,
    ).raise_for_status()
    pages = ["datahub/records/order", "conversation/records/conversation_close"]
    run_id, status = launched(ui, "__ASSET_JOB", {}, assets=pages)
    assert status == "SUCCESS", run_id
    pushed_by, figures = newest(ui, "datahub/records/order")
    assert pushed_by == run_id and newest(ui, pages[1])[0] == run_id
    truth = httpx.get(f"{base}/_sandbox/datahub/default/records/order", timeout=30).json()
    held = {record["key"] for record in truth}
    assert figures["sent"] == len(held) > 100 and refused not in held
    assert figures["refused"] == 1 and figures["rejected"] >= 4
    sources = rejected_sources(data, "order")
    assert sources[refused] == {"service"}
    assert all(sources[f"O-BROKEN-{n}"] == {"validation"} for n in (1, 2, 3)), sources
    assert figures["rejected_rows"]["records"], figures  # the page shows them
    return refused


def resends_from_the_launchpad(base: str, ui: str, data: Path, refused: str) -> None:
    """The hub takes the refused order now; `resend_rejected`, launched for the partition
    `order` as the launchpad fills it in (no config typed), sends it again at once."""
    httpx.put(
        f"{base}/_sandbox/datahub/default/records/order/refused", json={"keys": []}, timeout=30
    ).raise_for_status()
    [partition] = [
        graphql_with(
            ui, PARTITION, repo=repository(ui), set="resend_rejected_partition_set", name="order"
        )["partitionSetOrError"]["partition"]
    ]
    config = yaml.safe_load(partition["runConfigOrError"]["yaml"])
    tags = partition["tagsOrError"]["results"]
    run_id, status = launched(ui, "resend_rejected", config, tags=tags)
    assert status == "SUCCESS", run_id
    pushed_by, figures = newest(ui, "datahub/records/order")
    assert pushed_by == run_id
    assert (figures["sent"], figures["refused"], figures["refused_before"]) == (1, 0, 0)
    held = httpx.get(f"{base}/_sandbox/records/order/{refused}", timeout=30).json()
    assert held["submissions"] == 1
    assert refused not in rejected_sources(data, "order")


def shows_the_failing_connection(base: str, ui: str) -> None:
    """A bad key for one comment connection (the agency's, given the conversation
    service's key in the run's config): its run fails, and `comment/workspace`'s newest
    materialization shows that connection failing, why, and the other one landed."""
    api = f"{base}/comment/api/v1"
    connections = [
        {"name": "default", "base_url": api, "api_key_env": "COMMENT_AUTOMATION_API_KEY"},
        {"name": "agency", "base_url": api, "api_key_env": "CONVERSATION_API_KEY"},
    ]
    config = {"resources": {"comment": {"config": {"connections": connections}}}}
    _, status = launched(ui, "__ASSET_JOB", config, assets=["comment/workspace"])
    assert status == "FAILURE"
    _, metadata = newest(ui, "comment/workspace")
    health = {
        row["connection"]: row for row in map(json.loads, metadata["connection_health"]["records"])
    }
    assert health["agency"]["failing"] is True
    assert "CONVERSATION_API_KEY" in health["agency"]["last_error"]
    assert health["default"]["failing"] is False and health["default"]["last_landed_rows"] == 1


def test_make_dev_lands_pushes_resends_and_shows_health_through_the_ui_and_stops_on_ctrl_c(
    tmp_path,
):
    """`python -m demo.dev` (`make dev`): the live sandbox sends its webhooks and agent calls
    to the receivers it starts, the UI's sensors land what they stored; from the UI (its
    GraphQL, as its pages call it) a record type's page pushes the dev's shop, a refused
    row is sent again from a launchpad with nothing typed, and a connection that fails shows
    failing on its asset; its start says no warning, and a Ctrl-C (SIGINT to its process
    group, as a terminal sends it) leaves no process of it running 10 s later."""
    port, ui_port = free_ports(3), free_ports(1)  # the sandbox, then its two receivers
    data = tmp_path / "dev"
    env = as_a_user("DAGSTER_HOME", "WEBHOOK_SECRET", "AGENT_TOKEN")
    output = tmp_path / "dev.log"
    with output.open("wb") as log:
        dev = subprocess.Popen(
            [sys.executable, "-m", "demo.dev", "--port", str(port), "--ui-port", str(ui_port)]
            + ["--data", str(data)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as `make dev` in a terminal
        )
    base, ui = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}"
    started: dict[int, tuple[str, str]] = {}
    try:
        rows: dict[str, int] = {}
        deadline = time.monotonic() + 240
        while not (rows and all(rows.values())):
            assert dev.poll() is None, output.read_text()
            assert time.monotonic() < deadline, f"landed {rows}:\n{output.read_text()}"
            time.sleep(2)
            try:
                # What the sensors landed from the receivers' inboxes, as the UI shows it.
                rows = {
                    "webhook_events": latest_rows(ui, "datahub", "webhook_events"),
                    "agent_requests": latest_rows(ui, "conversation", "agent_requests"),
                }
            except (httpx.HTTPError, KeyError, TypeError, ValueError):
                continue
        # The sandbox's ground truth: what it delivered to the receivers, the agent calls.
        delivered = httpx.get(f"{base}/_sandbox/webhooks", timeout=30).json()["deliveries"]
        calls = httpx.get(f"{base}/_sandbox/agent", timeout=30).json()["calls"]
        refused = pushes_and_rejects_from_the_record_types_page(base, ui, data)
        resends_from_the_launchpad(base, ui, data, refused)
        shows_the_failing_connection(base, ui)
        nodes = graphql(ui, JOBS)["repositoriesOrError"]["nodes"]
        started = descendants(dev.pid)
    finally:
        os.killpg(dev.pid, signal.SIGINT)  # Ctrl-C
        stopped = time.monotonic()
        try:
            code = dev.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        # Every process it started, however deep, in its process group or not.
        started = started | descendants(dev.pid)
        while time.monotonic() - stopped < 10 and any(alive(p, t) for p, (t, _) in started.items()):
            time.sleep(0.1)
        late = {pid: args for pid, (at, args) in started.items() if alive(pid, at)}
        for pid in late:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if code is None:
            dev.kill()
            dev.wait()
    said = output.read_text()
    assert code == 0, said
    assert not late, f"still running 10 s after a Ctrl-C: {late}"
    names = " ".join(args for _, args in started.values())
    for started_one in ("sandbox", "pipelines.webhooks", "pipelines.agent", "dagster_webserver"):
        assert started_one in names, names
    assert "dagster._daemon" in names and "code-server" in names, names
    # Each receiver stored what the sandbox sent; the UI's runs landed it in the lake.
    keys = {d["idempotency_key"] for d in delivered if d["delivered"]}
    assert 0 < rows["webhook_events"] <= len(keys)
    assert 0 < rows["agent_requests"] <= len(calls)
    jobs = {job["name"] for node in nodes for job in node["jobs"]}
    expected = {"datahub_webhooks", "conversation_agent", "push", "resend_rejected", "check_setup"}
    assert expected <= jobs
    assert (data / "lake" / "datahub" / "webhook_events").is_dir()  # the demo's setup
    # No warning at start (a dagster.yaml beside the workspace, a superseded command).
    warned = [line for line in said.splitlines() if "Warning" in line or "WARNING" in line]
    assert not warned, "\n".join(warned)
    assert "Traceback" not in said
    # Nor Dagster's polling: its services say warnings and errors only (the runs' lines
    # are the product's).
    polled = [line for line in said.splitlines() if "Checking for new runs" in line]
    assert not polled, "\n".join(polled[:5])
    # Nor Python's word on a warnings filter it could not take (`demo/dev.py`).
    refused = [line for line in said.splitlines() if "Invalid -W option" in line]
    assert not refused, "\n".join(refused[:5])


def test_make_dev_says_in_one_line_which_server_did_not_start(tmp_path):
    """A port in use (here the webhook receiver's, the sandbox's port + 1): one line naming
    the server and where its output is, and exit 1."""
    port = free_ports(3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        finished = subprocess.run(
            [sys.executable, "-m", "demo.dev", "--port", str(port), "--data", str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert finished.returncode == 1, finished.stderr
    [line] = finished.stderr.splitlines()
    assert line.startswith("make dev: pipelines.webhooks exited at start; its output is in ")
    assert f"--port {port}" in line
    assert "address already in use" in (tmp_path / "logs" / "webhooks.log").read_text()
