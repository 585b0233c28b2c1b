"""Live soak: the product in live operation over simulated days (bench/README.md).

`python -m bench.soak [--days 30] [--scale small]`. A live sandbox (not frozen: trigger logs,
messages, members, broadcasts and webhook events keep arriving as its clock moves) is moved
forward hour by hour through `POST /_sandbox/clock/advance`, with no real waiting. This
process's clock follows the sandbox's (`time_machine`), since the product takes "today" from
the wall clock (`pipelines/pull/landing.py`).

The schedules' runs execute in this process (`execute_in_process` on a persistent instance, a
DAGSTER_HOME holding the repository's `instance/dagster.yaml`), not through the daemon and a run
launcher: at each simulated tick of a schedule of `assets/definitions.py` the schedule is
evaluated as the daemon would and its run request executed.

The "materialize all" of hour 0 takes the UI's path, once: `dagster-webserver` on the same
instance and `workspace.yaml` (as `make dev`), the GraphQL mutation the UI's "Materialize all"
then "Launch backfill" sends (`launchPartitionBackfill`: every asset, the unpartitioned
snapshots and views included, every partition by name), and `dagster-daemon run` until the
backfill is done (polled with `partitionBackfillOrError`); its runs are recorded as the
others. The schedules and sensors are turned off through the API first: the soak ticks the
schedules itself on the sandbox's clock, the daemon would on the wall clock. The backfill's
runs take "today" from the wall clock, which shares the sandbox's date at hour 0 (the sandbox
starts at the top of the current hour, or of `--start-hour` today) unless the wall clock
crosses a UTC midnight during hour 0.

After each hour the warehouse views are refreshed and read from a fresh read-only DuckDB
connection, while an analyst's session is held on `warehouse.duckdb` by a process of its own
from before the first landing: read-only for the first half, read-write for the second
(DuckDB refuses the two at once across processes).

Two discrepancies are planted: (a) an activity deleted through the API, which removes its
logs on older days too; (b) an older day file of `comment/trigger_logs` deleted from the lake.
A failing check is "real" when it fails after a plant on a check that plant explains, else a
false alarm. At the end every closed day of the daily streams is compared with the truth.

Only the `demo` comment workspace is pulled: the `agency` workspace is a trial that ends 30
days after the anchor (sandbox/README.md), after which it answers 403 `trial_expired`, which
a 30-day soak would reach on its last day and report as failed runs of the product.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import httpx
import time_machine

from bench.common import ROOT, free_port, report
from sandbox.process import point_at_sandbox, running_sandbox

#: The comment API's read-write key of the `demo` workspace (sandbox/README.md).
READ_WRITE_KEY = "sa_live_demo_readwrite"
#: Checks each plant should make fail (on `comment/trigger_logs`), WARN or ERROR.
EXPLAINED = {
    "a": {"rows_equal_service_total", "logs_match_daily_stats"},
    "b": {"rows_equal_service_total", "logs_match_daily_stats"},
}
#: Checks whose warning the sandbox's data makes true from the start: the first Instagram
#: account's token expires within 7 days (sandbox/README.md, "token expiry").
SEEDED = {"tokens_not_expiring"}
#: Views that by design do not hold every landed row (README.md, "Query the warehouse"): the latest
#: snapshot per broadcast, the latest member export.
NOT_ROW_FOR_ROW = {"datahub.broadcast_reports", "datahub.members"}
#: Ids in request paths, so that requests group by operation.
ID_IN_PATH = re.compile(r"/(?:[0-9a-f]{8}-[0-9a-f-]{27}|\d+|[A-Za-z0-9_-]{20,})(?=/|$)")
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def tree_cpu() -> float:
    """CPU seconds (user + system) of this process and every process under it, each with the
    children it has waited for (Linux's /proc): the sandbox, the webserver, the daemon and its
    run workers, the held sessions. A process whose parent ended before it (an orphan) is not
    counted once it ends, nor a child its parent has not waited for."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, pending = 0, [os.getpid()]
    while pending:
        pid = pending.pop()
        with suppress(OSError, ValueError):
            # The fields after the command's closing parenthesis: utime is the 12th.
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(n) for n in fields[11:15])  # utime, stime, cutime, cstime
            for task in Path(f"/proc/{pid}/task").iterdir():
                pending.extend(int(c) for c in (task / "children").read_text().split())
    return total / ticks


class Phases:
    """Wall and CPU seconds (`tree_cpu`) of the soak's phases, in the order they ran."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        wall, cpu, own = time.perf_counter(), tree_cpu(), time.process_time()
        try:
            yield
        finally:
            self.rows.append(
                {
                    "phase": name,
                    "wall_s": round(time.perf_counter() - wall, 1),
                    "cpu_s": round(tree_cpu() - cpu, 1),
                    "soak_process_cpu_s": round(time.process_time() - own, 1),
                }
            )


@dataclass
class Plant:
    name: str
    hour: int
    what: str = ""
    at: str = ""
    activity: str | None = None  # (a) the deleted activity
    day: date | None = None  # (b) the deleted day


@dataclass
class Soak:
    base: str
    data: Path
    plants: list[Plant]
    runs: list[dict] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    views: list[dict] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    sessions: dict = field(default_factory=dict)
    materialize_all: dict = field(default_factory=dict)
    phases: Phases = field(default_factory=Phases)


# -- the sandbox -----------------------------------------------------------------------------


def sandbox_now(base: str) -> datetime:
    return datetime.fromisoformat(httpx.get(f"{base}/_sandbox/clock").json()["now"])


def advance_to(base: str, moment: datetime) -> datetime:
    """Advance the sandbox's clock to `moment` (it also moves with the wall clock, so the
    step is what is left); returns its new now."""
    gap = (moment - sandbox_now(base)).total_seconds()
    if gap > 0:
        httpx.post(f"{base}/_sandbox/clock/advance", params={"seconds": gap}).raise_for_status()
    return sandbox_now(base)


def request_counts(base: str) -> Counter:
    counts: Counter = Counter()
    for entry in httpx.get(f"{base}/_sandbox/requests").json()["paths"]:
        counts[f"{entry['method']} {ID_IN_PATH.sub('/{id}', entry['path'])}"] += entry["count"]
    return counts


# -- held warehouse sessions ---------------------------------------------------------------


def hold_session(path: str, read_only: bool) -> None:
    """A session held open in a process of its own: says whether it opened, then answers
    each relation named on stdin with its row count (or the error)."""
    try:
        con = duckdb.connect(path, read_only=read_only)
    except duckdb.Error as exc:
        print(json.dumps({"open": False, "error": str(exc).splitlines()[0]}), flush=True)
        return
    print(json.dumps({"open": True}), flush=True)
    for line in sys.stdin:
        try:
            print(json.dumps(con.execute(f"SELECT count(*) FROM {line.strip()}").fetchone()[0]))
        except duckdb.Error as exc:
            print(json.dumps(str(exc).splitlines()[0]))
        sys.stdout.flush()


class HeldSession:
    def __init__(self, path: Path, read_only: bool) -> None:
        mode = "--hold-read-only" if read_only else "--hold-read-write"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.soak", mode, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.opened = json.loads(self.process.stdout.readline())

    def count(self, relation: str):
        if not self.opened["open"]:
            return None
        self.process.stdin.write(relation + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=10)


# -- runs ----------------------------------------------------------------------------------


def record_run(
    soak: Soak, hour: int, label: str, job: str, success: bool, events, seconds: float
) -> None:
    """One finished run in the result: its failed steps and every check's evaluation, from
    its Dagster events (an in-process result's, or the instance's event log for a run the
    daemon launched). A run over days records a check's one result on each of its days
    (`assets/checks.py`, `each_day`): it is one evaluation here, with how many days hold it."""
    import dagster as dg

    from assets.sync import failure_reason

    failed = {e.step_key: failure_reason(e) for e in events if e.is_step_failure}
    soak.runs.append(
        {
            "hour": hour,
            "run": label,
            "job": job,
            "success": success,
            "failed_steps": failed,
            "seconds": round(seconds, 1),
        }
    )
    of_run: dict[tuple[str, str], dict] = {}
    for event in events:
        if event.event_type != dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            continue
        evaluation = event.asset_check_evaluation_data
        asset = evaluation.asset_key.to_user_string()
        if (asset, evaluation.check_name) in of_run:
            of_run[asset, evaluation.check_name]["days"] += 1
            continue
        of_run[asset, evaluation.check_name] = {
            "hour": hour,
            "run": label,
            "asset": asset,
            "check": evaluation.check_name,
            "passed": evaluation.passed,
            "severity": evaluation.severity.value,
            "description": evaluation.description,
            "days": 1 if evaluation.partition else 0,
        }
    soak.checks.extend(of_run.values())


def execute(soak: Soak, defs, instance, hour: int, label: str, job: str, **request) -> None:
    """One run as Dagster launches it, executed in process; its failures and every check
    evaluation recorded."""
    started = time.monotonic()
    result = defs.resolve_job_def(job).execute_in_process(
        instance=instance,
        run_config={**request.pop("run_config", {}), **QUIET},
        raise_on_error=False,
        **request,
    )
    record_run(
        soak, hour, label, job, result.success, result.all_events, time.monotonic() - started
    )


def ticks_in(cron: str, start: datetime) -> list[datetime]:
    """The ticks of a `M * * * *` or `M H * * *` schedule (those of assets/definitions.py)
    within the hour starting at `start`."""
    minute, hour = cron.split()[:2]
    if hour != "*" and int(hour) != start.hour:
        return []
    return [start.replace(minute=int(minute))]


def run_schedules(soak: Soak, defs, instance, hour: int, start: datetime, moved) -> None:
    import dagster as dg

    repository = defs.get_repository_def()
    due = sorted(
        (
            (tick, schedule)
            for schedule in repository.schedule_defs
            for tick in ticks_in(schedule.cron_schedule, start)
        ),
        key=lambda due: due[0],
    )
    for tick, schedule in due:
        moved(advance_to(soak.base, tick))
        # The code location's resources, as the daemon gives them (the hourly schedules read
        # the lake's days: assets/definitions.py).
        context = dg.build_schedule_context(
            instance=instance, scheduled_execution_time=tick, resources=defs.resources
        )
        for request in schedule.evaluate_tick(context).run_requests or []:
            execute(
                soak,
                defs,
                instance,
                hour,
                f"{schedule.name} {tick:%Y-%m-%d %H:%M}",
                request.job_name or schedule.job_name,
                tags=request.tags,
                partition_key=request.partition_key,
                run_config=request.run_config,
            )


# -- the UI's materialize all --------------------------------------------------------------

#: The UI's own operations, as dagster-webserver 1.13's bundle holds them (its source maps:
#: ui-core `instance/backfill/BackfillUtils.tsx`, `schedules/ScheduleMutations.tsx`,
#: `sensors/SensorMutations.tsx`), their answers trimmed to what the soak reads.
LAUNCH_PARTITION_BACKFILL = """
mutation LaunchPartitionBackfill($backfillParams: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $backfillParams) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
  }
}"""
STOP_SCHEDULE = """
mutation StopSchedule($id: String!) {
  stopRunningSchedule(id: $id) { __typename ... on Error { message } }
}"""
STOP_SENSOR = """
mutation StopRunningSensor($id: String!) {
  stopSensor(id: $id) { __typename ... on Error { message } }
}"""
LOCATIONS = """
query Locations {
  workspaceOrError {
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}"""
INSTIGATORS = """
query Instigators {
  repositoriesOrError {
    ... on RepositoryConnection {
      nodes {
        schedules { name scheduleState { id status } }
        sensors { name sensorState { id status } }
      }
    }
  }
}"""
#: What the "Materialize all" button reads of each asset (ui-core
#: `assets/LaunchAssetExecutionButton.tsx`, LaunchAssetExecutionAssetNodeFragment).
ASSET_NODES = """
query LaunchAssetLoader {
  assetNodes {
    assetKey { path }
    isExecutable
    isObservable
    jobNames
    partitionDefinition { description dimensionTypes { name } }
    partitionKeysByDimension { partitionKeys }
    repository { name location { name } }
  }
}"""
BACKFILL = """
query BackfillStatus($backfillId: String!) {
  partitionBackfillOrError(backfillId: $backfillId) {
    __typename
    ... on PartitionBackfill { status numPartitions error { message } runs { runId status } }
    ... on Error { message }
  }
}"""
#: A backfill's statuses once the daemon is done with it (BulkActionStatus), and a run's.
BACKFILL_DONE = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}
RUN_DONE = {"SUCCESS", "FAILURE", "CANCELED"}
#: Seconds allowed: the webserver to load the code location; the backfill to finish (this
#: machine is shared).
WEBSERVER_SECONDS = 300
BACKFILL_SECONDS = 1800
#: `dagster-daemon run`, looking at backfills every 5 s instead of 30. An asset backfill
#: takes one look per wave of runs (roots, their dependents, the views, done), so most of the
#: soak's backfill was the daemon sleeping. Dagster has no setting for it: its backfill loop
#: reads this module constant on each pass (were the name to change, the loop would keep its
#: 30 s and the soak would only be slower).
DAEMON = (
    "import sys\n"
    "import dagster._daemon.controller as controller\n"
    "from dagster._daemon.cli import main\n"
    "controller.DEFAULT_DAEMON_INTERVAL_SECONDS = 5\n"
    "sys.exit(main())\n"
)


def graphql(ui: str, query: str, **variables) -> dict:
    answer = httpx.post(f"{ui}/graphql", json={"query": query, "variables": variables}, timeout=120)
    answer.raise_for_status()
    body = answer.json()
    if body.get("errors"):
        raise RuntimeError(f"GraphQL errors from {ui}: {body['errors']}")
    return body["data"]


def log_tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def dagster_process(command: list[str], log: Path) -> Iterator[subprocess.Popen]:
    """`dagster-webserver` or `dagster-daemon` on the soak's DAGSTER_HOME, in a session of its
    own: the code servers and run workers it starts are stopped with it."""
    with open(log, "w") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield process
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        deadline = time.monotonic() + 30
        with suppress(ProcessLookupError):  # raised once nothing of the session is left
            while True:
                os.killpg(process.pid, 0 if time.monotonic() < deadline else signal.SIGKILL)
                time.sleep(0.5)


def wait_for_webserver(ui: str, process: subprocess.Popen, log: Path) -> None:
    """Until the webserver answers with the code location of workspace.yaml loaded."""
    deadline = time.monotonic() + WEBSERVER_SECONDS
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"dagster-webserver exited {process.returncode}:\n{log_tail(log)}")
        with suppress(httpx.HTTPError):
            entries = graphql(ui, LOCATIONS)["workspaceOrError"].get("locationEntries") or []
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                broken = [
                    f"{e['name']}: {e['locationOrLoadError'].get('message')}"
                    for e in entries
                    if e["locationOrLoadError"]["__typename"] != "RepositoryLocation"
                ]
                if broken:
                    raise RuntimeError(f"the code location does not load: {broken}")
                return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"dagster-webserver on {ui} did not serve the code location of workspace.yaml "
                f"within {WEBSERVER_SECONDS} s:\n{log_tail(log)}"
            )
        time.sleep(1)


def stop_schedules_and_sensors(ui: str) -> list[str]:
    """Turn off every running schedule and sensor, as the UI's toggles do. The soak evaluates
    the schedules itself on the sandbox's clock and runs no sensors; the daemon would tick
    both on the wall clock while it executes the backfill."""
    stopped = []
    for repository in graphql(ui, INSTIGATORS)["repositoriesOrError"]["nodes"]:
        toggles = [
            (STOP_SCHEDULE, "stopRunningSchedule", s["name"], s["scheduleState"])
            for s in repository["schedules"]
        ] + [
            (STOP_SENSOR, "stopSensor", s["name"], s["sensorState"]) for s in repository["sensors"]
        ]
        for mutation, field_name, name, state in toggles:
            if state["status"] != "RUNNING":
                continue
            answer = graphql(ui, mutation, id=state["id"])[field_name]
            if "message" in answer:
                raise RuntimeError(f"{field_name} {name}: {answer['message']}")
            stopped.append(name)
    return stopped


def materialize_all_params(ui: str) -> dict:
    """The `backfillParams` the UI sends for "Materialize all" over every asset, then "Launch
    backfill" with the dialog's default, every partition (ui-core
    `assets/LaunchAssetChoosePartitionsDialog.tsx`, `onLaunchAsBackfill`). Assets of one code
    location whose partitioned ones share a partitions definition have the hidden asset job in
    common, so the UI takes the branch that lists the partitions by name; the unpartitioned
    ones (snapshots, the views) are part of the same asset backfill. The other branches
    (a user job: a partition set; partitions that differ: `allPartitions: true`) are not
    this code location's, and are refused rather than guessed at."""
    nodes = graphql(ui, ASSET_NODES)["assetNodes"]
    assets = [a for a in nodes if a["isExecutable"] and not a["isObservable"]]
    partitioned = [a for a in assets if a["partitionDefinition"]]
    spaces = {json.dumps(a["partitionDefinition"], sort_keys=True) for a in partitioned}
    locations = {(a["repository"]["name"], a["repository"]["location"]["name"]) for a in assets}
    common = [j for j in assets[0]["jobNames"] if all(j in a["jobNames"] for a in assets)]
    if len(locations) != 1 or len(spaces) != 1 or not common:
        raise RuntimeError(
            "the UI would launch this selection another way than the soak reproduces: "
            f"{len(locations)} code location(s), {len(spaces)} partitions definition(s), "
            f"jobs in common: {common}"
        )
    if not common[0].startswith(("__ASSET_JOB", "__anonymous_asset_job")):
        raise RuntimeError(f"assets share the user job {common[0]}: the UI sends a partition set")
    return {
        "tags": [{"key": "dagster/from_ui", "value": "true"}],
        "assetSelection": [{"path": a["assetKey"]["path"]} for a in assets],
        "partitionNames": partitioned[0]["partitionKeysByDimension"][0]["partitionKeys"],
        "fromFailure": False,
    }


def wait_for_backfill(ui: str, backfill_id: str, what: str, log: Path) -> dict:
    """Poll the backfill until the daemon is done with it and each of its runs has ended."""
    deadline = time.monotonic() + BACKFILL_SECONDS
    while True:
        backfill = graphql(ui, BACKFILL, backfillId=backfill_id)["partitionBackfillOrError"]
        if backfill["__typename"] != "PartitionBackfill":
            raise RuntimeError(f"backfill {backfill_id}: {backfill.get('message')}")
        if backfill["status"] in BACKFILL_DONE and all(
            r["status"] in RUN_DONE for r in backfill["runs"]
        ):
            return backfill
        if time.monotonic() > deadline:
            runs = Counter(r["status"] for r in backfill["runs"])
            raise TimeoutError(
                f"backfill {backfill_id} ({what}) not done after {BACKFILL_SECONDS} s: status "
                f"{backfill['status']}, runs {dict(runs)}; the daemon's log:\n{log_tail(log)}"
            )
        time.sleep(2)


def materialize_all(soak: Soak, defs, instance, warehouse: Path) -> dict:
    """The UI's "Materialize all", once, at hour 0: `dagster-webserver` on the soak's instance
    and code location (workspace.yaml, as `make dev`), the backfill the UI launches through
    its GraphQL API, and `dagster-daemon run` for as long as the backfill takes (the daemon
    executes backfills). Its runs are recorded as `execute` records a run; what the instance
    recorded of each check in them, and the relations the warehouse holds once it is done, are
    reported."""
    import dagster as dg

    from assets.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    started = time.monotonic()
    tools = Path(sys.executable).parent
    ui = f"http://127.0.0.1:{free_port()}"
    webserver_log, daemon_log = soak.data / "webserver.log", soak.data / "daemon.log"
    phase = soak.phases
    with ExitStack() as processes:
        serving_phase = phase("hour 0: materialize all: webserver start until serving")
        serving_phase.__enter__()
        webserver = processes.enter_context(
            dagster_process(
                [
                    str(tools / "dagster-webserver"),
                    *("-w", "workspace.yaml", "-h", "127.0.0.1", "-p", ui.rsplit(":", 1)[1]),
                ],
                webserver_log,
            )
        )
        wait_for_webserver(ui, webserver, webserver_log)
        serving_phase.__exit__(None, None, None)
        serving = time.monotonic() - started
        launching = phase("hour 0: materialize all: stop schedules, read assets, launch")
        launching.__enter__()
        stopped = stop_schedules_and_sensors(ui)
        params = materialize_all_params(ui)
        what = (
            f"materialize all: {len(params['assetSelection'])} assets, "
            f"{len(params['partitionNames'])} partitions"
        )
        launched = graphql(ui, LAUNCH_PARTITION_BACKFILL, backfillParams=params)
        launched = launched["launchPartitionBackfill"]
        if launched["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(f"{what}: {launched['__typename']} {launched.get('message')}")
        backfill_id = launched["backfillId"]
        launching.__exit__(None, None, None)
        with phase("hour 0: materialize all: daemon start, backfill until done"):
            processes.enter_context(
                dagster_process(
                    [sys.executable, "-c", DAEMON, "run", "-w", "workspace.yaml"], daemon_log
                )
            )
            backfill = wait_for_backfill(ui, backfill_id, what, daemon_log)
        stopping = phase("hour 0: materialize all: webserver and daemon stopped")
        stopping.__enter__()
    stopping.__exit__(None, None, None)
    recording = phase("hour 0: materialize all: runs, checks and relations read back")
    recording.__enter__()
    ids = [r["runId"] for r in backfill["runs"]]
    records = sorted(
        instance.get_run_records(dg.RunsFilter(run_ids=ids)),
        key=lambda r: (r.start_time or 0, r.dagster_run.run_id),
    )
    checks_before = len(soak.checks)
    for number, record in enumerate(records, 1):
        run = record.dagster_run
        tags = run.tags
        days = (
            f" {tags[ASSET_PARTITION_RANGE_START_TAG]}..{tags[ASSET_PARTITION_RANGE_END_TAG]}"
            if ASSET_PARTITION_RANGE_START_TAG in tags
            else ""
        )
        keys = sorted(k.to_user_string() for k in run.asset_selection or ())
        events = [
            entry.dagster_event
            for entry in instance.all_logs(
                run.run_id,
                of_type={
                    dg.DagsterEventType.STEP_FAILURE,
                    dg.DagsterEventType.ASSET_CHECK_EVALUATION,
                },
            )
        ]
        record_run(
            soak,
            0,
            f"materialize all: backfill {backfill_id} run {number}{days} {', '.join(keys)}",
            run.job_name,
            run.status == dg.DagsterRunStatus.SUCCESS,
            events,
            (record.end_time or 0) - (record.start_time or record.end_time or 0),
        )
    checks = checks_recorded(defs, instance, ids)
    relations = relations_in(warehouse)
    recording.__exit__(None, None, None)
    return {
        "launched": "launchPartitionBackfill through dagster-webserver's GraphQL API, "
        "executed by dagster-daemon",
        "backfill": backfill_id,
        "status": backfill["status"],
        "error": (backfill["error"] or {}).get("message"),
        "assets": len(params["assetSelection"]),
        "partitions": len(params["partitionNames"]),
        "runs": len(records),
        "check_evaluations": len(soak.checks) - checks_before,
        "checks": checks,
        "warehouse_relations": relations,
        "schedules_and_sensors_stopped": stopped,
        "seconds_to_webserver_serving": round(serving, 1),
        "seconds": round(time.monotonic() - started, 1),
    }


def checks_recorded(defs, instance, run_ids: list[str]) -> dict:
    """Per check of the code location, what the instance holds of it for `run_ids`, as the
    asset's Checks tab lists it: the records of each run that has any, beside how many the
    run should hold (one per day of its range for a check of a day-partitioned asset,
    `assets/checks.py`'s `each_day`; else one), how many are still planned (a finished
    run's show as "Skipped") though the check did not say it compared nothing (its step's
    output names it, `_skipped`), and how many repeat a run's day (or its one result)."""
    import dagster as dg
    from dagster._core.storage.asset_check_execution_record import (
        AssetCheckExecutionRecordStatus,
    )

    from assets.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    graph = defs.resolve_asset_graph()
    runs = {run.run_id: run for run in instance.get_runs(dg.RunsFilter(run_ids=run_ids))}
    skipped = {
        (run_id, entry.dagster_event.event_specific_data.metadata["check"].value)
        for run_id in run_ids
        for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_OUTPUT)
        if "check" in entry.dagster_event.event_specific_data.metadata
    }
    recorded = {}
    for key in sorted(graph.asset_check_keys, key=str):
        partitions = graph.get(key).partitions_def
        history = [
            r
            for r in instance.event_log_storage.get_asset_check_execution_history(key, limit=5000)
            if r.run_id in run_ids
        ]
        per_run = Counter(r.run_id for r in history)
        expected = {}
        for run_id in per_run:
            tags = runs[run_id].tags
            first = tags.get(ASSET_PARTITION_RANGE_START_TAG)
            last = tags.get(ASSET_PARTITION_RANGE_END_TAG)
            expected[run_id] = (
                len(partitions.get_partition_keys_in_range(dg.PartitionKeyRange(first, last)))
                if partitions is not None and first and last
                else 1
            )
        recorded[key.to_user_string()] = {
            "records_per_run": [per_run[run_id] for run_id in sorted(per_run)],
            "expected_per_run": [expected[run_id] for run_id in sorted(per_run)],
            "planned_left": sum(
                r.status == AssetCheckExecutionRecordStatus.PLANNED
                and (r.run_id, key.to_user_string()) not in skipped
                for r in history
            ),
            "repeated": sum(
                n - 1 for n in Counter((r.run_id, r.partition) for r in history).values()
            ),
        }
    return recorded


def relations_in(warehouse: Path) -> list[str]:
    """The relations `warehouse.duckdb` defines, read as an analyst would (read-only)."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return sorted(
            f"{schema}.{name}"
            for schema, name in con.execute(
                "SELECT table_schema, table_name FROM information_schema.tables"
            ).fetchall()
        )


# -- plants --------------------------------------------------------------------------------


def plant_deleted_activity(soak: Soak, plant: Plant, lake) -> None:
    """(a) Delete the activity with the most landed logs over the most days."""
    from pipelines.streams.comment import TRIGGER_LOGS

    activity, rows, days = lake.query(
        f"SELECT activity_id, count(*), count(DISTINCT date) FROM {lake.relation(TRIGGER_LOGS)} "
        "GROUP BY 1 ORDER BY 3 DESC, 2 DESC LIMIT 1"
    )[0]
    httpx.delete(
        f"{soak.base}/comment/api/v1/activities/{activity}",
        headers={"Authorization": f"Bearer {READ_WRITE_KEY}"},
    ).raise_for_status()
    plant.what = f"deleted activity {activity} ({rows} landed logs over {days} days)"
    plant.activity = activity


def plant_deleted_day_file(soak: Soak, plant: Plant, lake, today: date) -> None:
    """(b) Delete an older, closed day's file of trigger logs from the lake."""
    from pipelines.streams.comment import TRIGGER_LOGS

    day = today - timedelta(days=10)
    lake.fs.delete_file(lake.path(TRIGGER_LOGS, "default", day))
    plant.what = f"deleted the lake's comment/trigger_logs file of {day}"
    plant.day = day


def classify(soak: Soak) -> None:
    """A failing evaluation is real when a plant made before its hour explains it."""
    for check in soak.checks:
        if check["passed"]:
            check["verdict"] = "passed"
            continue
        if check["check"] in SEEDED:
            check["verdict"] = "true (sandbox data)"
            continue
        explaining = [
            p
            for p in soak.plants
            if p.at
            and p.hour < check["hour"] + 1
            and check["asset"] == "comment/trigger_logs"
            and check["check"] in EXPLAINED[p.name]
        ]
        check["verdict"] = f"real ({explaining[-1].name})" if explaining else "false alarm"


# -- views and truth -----------------------------------------------------------------------


def views_current(soak: Soak, lake, settings, hour: int, session: HeldSession) -> None:
    """Refresh the views, then compare each pulled relation's rows through a fresh read-only
    connection with the lake's, while `session` holds the file. The held session is asked
    too and must answer, but keeps the file it opened until it reconnects (a rebuild puts a
    new file in place beside it), so its counts are reported, not required to be current."""
    from assets.definitions import STREAMS
    from pipelines.warehouse import WarehouseBusy
    from pipelines.warehouse.relations import refresh_warehouse

    try:
        outcome = refresh_warehouse(
            settings.lake_root, settings.warehouse_path, settings.warehouse_sql
        )
    except WarehouseBusy as busy:
        outcome = f"FAILED: {busy}"
    mismatched, error = {}, None
    try:
        con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    except duckdb.Error as exc:
        con, error = None, str(exc).splitlines()[0]
    for stream in STREAMS:
        if lake.relation(stream) is None:
            continue
        landed = lake.query(f"SELECT count(*) FROM {lake.relation(stream)}")[0][0]
        fresh = (
            con.execute(f"SELECT count(*) FROM {stream.relation}").fetchone()[0] if con else None
        )
        held = session.count(stream.relation)
        # A view that is not row for row with the lake: then only, has it any row?
        current = bool(fresh) if stream.relation in NOT_ROW_FOR_ROW else fresh == landed
        if not current or not isinstance(held, int):
            mismatched[stream.relation] = {"lake": landed, "fresh": fresh, "held": held}
    if con:
        con.close()
    soak.views.append(
        {"hour": hour, "refresh": outcome, "open_error": error, "mismatched": mismatched}
    )


def closed_days(soak: Soak, lake, today: date) -> list[dict]:
    """Every closed day of trigger logs and messages, lake against truth, per connection.
    Days the truth no longer covers are left out, and the first day of messages (the service
    serves it only in part: sandbox/README.md)."""
    from pipelines.streams.comment import TRIGGER_LOGS
    from pipelines.streams.conversation import MESSAGES

    workspace = httpx.get(
        f"{soak.base}/comment/api/v1/me", headers={"Authorization": f"Bearer {READ_WRITE_KEY}"}
    ).json()["workspace"]["id"]
    deleted = next((p.activity for p in soak.plants if p.name == "a"), None)
    compared = [
        ("comment", workspace, TRIGGER_LOGS, "default", False),
        ("conversation", "default", MESSAGES, "default", True),
        ("conversation", "jp", MESSAGES, "jp", True),
    ]
    rows = []
    for service, scope, stream, connection, partial_first in compared:
        truth = httpx.get(f"{soak.base}/_sandbox/truth/{service}/{scope}/{stream.name}/days")
        truth_days = {date.fromisoformat(d): n for d, n in truth.json()["days"].items()}
        served = sorted(d for d in truth_days if d < today)[1 if partial_first else 0 :]
        landed = dict(
            lake.query(
                f"SELECT date, count(*) FROM {lake.relation(stream)} WHERE connection = ? "
                "GROUP BY 1",
                [connection],
            )
        )
        kept = landed
        if stream is TRIGGER_LOGS and deleted:
            kept = dict(
                lake.query(
                    f"SELECT date, count(*) FROM {lake.relation(stream)} "
                    "WHERE connection = ? AND activity_id <> ? GROUP BY 1",
                    [connection, deleted],
                )
            )
        unequal, explained = [], []
        for day in served:
            if landed.get(day, 0) == truth_days[day]:
                continue
            plant_b = any(p.day == day for p in soak.plants)
            plant_a = deleted and kept.get(day, 0) == truth_days[day]
            entry = {"day": day.isoformat(), "lake": landed.get(day, 0), "truth": truth_days[day]}
            (explained if plant_a or plant_b else unequal).append(entry)
        rows.append(
            {
                "stream": f"{stream.relation} ({connection})",
                "closed_days": len(served),
                "closed_days_with_rows": sum(truth_days[day] > 0 for day in served),
                "equal": len(served) - len(unequal) - len(explained),
                "explained_by_plants": len(explained),
                "unequal": len(unequal),
                "unequal_days": unequal[:10],
            }
        )
    return rows


# -- the soak ------------------------------------------------------------------------------


def run(
    hours: int,
    scale: str,
    plant_hours: dict[str, int],
    start_hour: int | None = None,
    history_days: int | None = None,
) -> dict:
    wall = time.monotonic()
    phase = Phases()
    anchor = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    if start_hour is not None:
        # Today's hour, past or to come: the webserver's and daemon's clock (the wall's)
        # then shares the sandbox's date at hour 0, as the backfill's partitions need.
        anchor = anchor.replace(hour=start_hour)
    with ExitStack() as stack:
        data = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soak-")))
        sandbox_started = phase("sandbox start")
        sandbox_started.__enter__()
        base = stack.enter_context(
            running_sandbox(
                free_port(),
                "--scale",
                scale,
                "--now",
                anchor.isoformat(),
                "--arrivals-per-minute",
                "1",
                "--campaign-minutes",
                "240",
                "--rate-window",
                "2",
                # Backups and exports finish in a second of wall time: the clock does not
                # move while a run polls them.
                "--task-phase-seconds",
                "0.3",
                *(("--history-days", str(history_days)) if history_days else ()),
                startup_seconds=300,
            )
        )
        sandbox_started.__exit__(None, None, None)
        env = point_at_sandbox(base, data)
        env.pop("AGENCY_COMMENT_AUTOMATION_API_KEY")  # the trial workspace: module docstring
        (data / "soak-sync.toml").write_text("[service.comment]\nrate_window_seconds = 2\n")
        env["SYNC_CONFIG"] = str(data / "soak-sync.toml")
        env["DAGSTER_HOME"] = str(data / "dagster")
        if history_days:
            # The partitions start on the history's first day (its messages' partial one):
            # "materialize all" lands every day that holds data, and no more.
            env["SYNC_START_DATE"] = (anchor.date() - timedelta(days=history_days)).isoformat()
        (data / "dagster").mkdir()
        shutil.copy(ROOT / "instance" / "dagster.yaml", data / "dagster" / "dagster.yaml")
        with open(data / "dagster" / "dagster.yaml", "a") as instance_yaml:
            instance_yaml.write("telemetry:\n  enabled: false\n")
        os.environ.update(env)
        os.environ["SYNC_LOG_LEVEL"] = "ERROR"

        clock = stack.enter_context(time_machine.travel(sandbox_now(base), tick=True))
        importing = phase("imports, instance, first warehouse, read-only session")
        importing.__enter__()
        # Imported on the sandbox's clock: the partitions start from its today.
        import dagster as dg

        from assets.definitions import defs
        from pipelines.lake import Lake
        from pipelines.settings import load_settings
        from pipelines.warehouse.relations import refresh_warehouse

        settings = load_settings()
        lake = Lake(settings.lake_root)
        instance = stack.enter_context(dg.DagsterInstance.get())
        soak = Soak(
            base,
            data,
            [Plant(name, hour) for name, hour in sorted(plant_hours.items())],
            phases=phase,
        )
        # An analyst holds the warehouse from before anything lands: read-only for the first
        # half, read-write (careless) for the second. DuckDB refuses both at once across
        # processes, so they take turns.
        refresh_warehouse(settings.lake_root, settings.warehouse_path, settings.warehouse_sql)
        session = HeldSession(settings.warehouse_path, read_only=True)
        soak.sessions = {"read-only from hour 0": session.opened}
        importing.__exit__(None, None, None)
        seen = request_counts(base)
        for hour in range(hours):
            start = anchor + timedelta(hours=hour)
            clock.move_to(advance_to(base, start))
            if hour == 0:
                soak.materialize_all = materialize_all(
                    soak, defs, instance, settings.warehouse_path
                )
            if hour == hours // 2:
                with phase(f"hour {hour}: read-write session"):
                    session.close()
                    session = HeldSession(settings.warehouse_path, read_only=False)
                soak.sessions[f"read-write from hour {hour}"] = session.opened
            for plant in soak.plants:
                if plant.hour == hour:
                    with phase(f"hour {hour}: plant {plant.name}"):
                        if plant.name == "a":
                            plant_deleted_activity(soak, plant, lake)
                        else:
                            plant_deleted_day_file(soak, plant, lake, start.date())
                    plant.at = start.isoformat()
            hour_started = time.monotonic()
            ran = len(soak.runs)
            with phase(f"hour {hour} ({start:%H}:00): schedules"):
                run_schedules(soak, defs, instance, hour, start, clock.move_to)
            phase.rows[-1]["runs"] = [r["run"] for r in soak.runs[ran:]]
            with phase(f"hour {hour}: views current"):
                views_current(soak, lake, settings, hour, session)
            now = request_counts(base)
            soak.requests.append({"hour": hour, **(now - seen)})
            soak.views[-1]["seconds"] = round(time.monotonic() - hour_started, 1)
            seen = now
        session.close()
        end = anchor + timedelta(hours=hours)
        clock.move_to(advance_to(base, end))
        classify(soak)
        with phase("closed days against the truth"):
            days = closed_days(soak, lake, end.date())
        result = summary(soak, days, hours, time.monotonic() - wall)
        result["history_days"] = history_days or "a year (the sandbox's default)"
        return result


def summary(soak: Soak, days: list[dict], hours: int, wall: float) -> dict:
    failing = [c for c in soak.checks if not c["passed"]]
    caught = {
        p.name: [c for c in failing if c["verdict"] == f"real ({p.name})"] for p in soak.plants
    }
    per_plant = {
        p.name: {
            "planted": p.what,
            "at": p.at,
            "caught_by": sorted({f"{c['check']} ({c['severity']})" for c in caught[p.name]}),
            "first_caught_hour": min((c["hour"] for c in caught[p.name]), default=None),
        }
        for p in soak.plants
    }
    false_alarms = [c for c in failing if c["verdict"] == "false alarm"]
    hourly_seconds = [v["seconds"] for v in soak.views[1:]]
    streams: defaultdict = defaultdict(list)
    for hourly in soak.requests[1:]:  # hour 0 holds the materialize all
        for path in {k for h in soak.requests for k in h if k != "hour"}:
            streams[path].append(hourly.get(path, 0))
    return {
        "executed": "the schedules' runs in process (execute_in_process on a persistent "
        "DAGSTER_HOME instance); the materialize all of hour 0 launched through "
        "dagster-webserver's GraphQL API as the UI does, a backfill dagster-daemon executes",
        "materialize_all": soak.materialize_all,
        "simulated_hours": hours,
        "wall_seconds": round(wall, 1),
        "runs": len(soak.runs),
        "seconds_per_hour_after_hour_0": {
            "mean": round(sum(hourly_seconds) / max(len(hourly_seconds), 1), 1),
            "max": max(hourly_seconds, default=0),
        },
        "runs_failed": [r for r in soak.runs if not r["success"]],
        "checks_evaluated": len(soak.checks),
        "checks_failed": {
            severity: Counter(
                f"{c['check']}: {c['verdict']}" for c in failing if c["severity"] == severity
            )
            for severity in ("ERROR", "WARN")
        },
        "plants": per_plant,
        "false_alarms": false_alarms,
        "closed_days": days,
        "views_not_current_hours": [v for v in soak.views if v["mismatched"] or v["open_error"]],
        "run_list": soak.runs,
        "warehouse_refresh": Counter(v["refresh"] for v in soak.views),
        "held_sessions": soak.sessions,
        "phases": soak.phases.rows,
        "requests_per_hour": {
            path: {"after_hour_0_total": sum(n), "mean": round(sum(n) / len(n), 1), "max": max(n)}
            for path, n in sorted(streams.items())
            if sum(n)
        },
        "requests_hour_0": {k: v for k, v in soak.requests[0].items() if k != "hour"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--hours", type=int, help="simulated hours (instead of --days)")
    parser.add_argument("--scale", default="small")
    parser.add_argument(
        "--start-hour",
        type=int,
        choices=range(24),
        help="start at this UTC hour of today (default: the current hour); 21 with --hours 6 "
        "crosses 23:30, midnight and 02:30",
    )
    parser.add_argument(
        "--history-days",
        type=int,
        choices=range(11, 366),
        metavar="{11..365}",
        help="the sandbox's history on this many days before the start (sandbox "
        "--history-days) and the partitions from its first day (SYNC_START_DATE): hour 0's "
        "materialize all lands that many days, not a year (tests/test_soak.py: 11). At least "
        "11: plant (b) deletes the day file of 10 days before",
    )
    parser.add_argument("--no-plants", action="store_true")
    parser.add_argument(
        "--json", type=Path, help="write the result here instead of bench/results (tests)"
    )
    parser.add_argument("--hold-read-only", help=argparse.SUPPRESS)
    parser.add_argument("--hold-read-write", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hold_read_only or args.hold_read_write:
        hold_session(args.hold_read_only or args.hold_read_write, bool(args.hold_read_only))
        return
    hours = args.hours or round(args.days * 24)
    # (a) a third of the way in, (b) two thirds: each has hours left to be caught.
    plants = {} if args.no_plants else {"a": hours // 3, "b": 2 * hours // 3}
    result = run(hours, args.scale, plants, args.start_hour, args.history_days)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
        return
    rows = [
        {"figure": "runs", "value": result["runs"], "failed": len(result["runs_failed"])},
        {"figure": "check evaluations", "value": result["checks_evaluated"]},
        {"figure": "false alarms", "value": len(result["false_alarms"])},
        *(
            {
                "figure": f"closed days {d['stream']}",
                "value": d["closed_days"],
                "failed": d["unequal"],
            }
            for d in result["closed_days"]
        ),
        {"figure": "hours views not current", "value": len(result["views_not_current_hours"])},
    ]
    details = {k: v for k, v in result.items() if k not in ("runs", "run_list")}
    report("soak", rows, **json.loads(json.dumps(details, default=str)))


if __name__ == "__main__":
    main()
