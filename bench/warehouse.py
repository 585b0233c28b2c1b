"""`python -m bench.warehouse`: analysts' queries through `warehouse.duckdb` beside the same
rows in native DuckDB tables, and the hourly sync on a year-old lake beside a week-old one.

1. **Queries.** A frozen `--scale large` sandbox, rate limits and pacing off: a year of
   trigger logs (1,100,000) and the activities synced, then a month of operation simulated:
   for each of the last 30 days as today, that day's and the day before's files landed
   again (rewritten whole, as each hourly landing does) and the warehouse brought up to
   date as a landing does (`Warehouse.refresh(written=...)`, pipelines/warehouse/__init__.py): 30
   builds, each closing a day. Then, in one process, a read-only session on the file and
   the same rows copied into native tables of an in-memory database attached to it; each
   query run once to warm up, then 5 times each way, alternating; the medians and their
   ratio. Target: every query within 2x of native. The results must be equal both ways.
   The same again with the lake in a local S3 server (moto), reported without a target.
2. **The hourly run.** `python -m cli sync --streams comment.trigger_logs --start
   <yesterday> --end <today>` (one request: nothing new) on the year-old lake and on a
   week-old one (its last 7 days), each warmed up once, then 3 rounds alternating, whole
   process: wall and CPU. Target: the year-old at most 1.2x the week-old in both.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow.fs as pafs

from bench.common import ROOT, measured_run, pipeline_env, print_table, report, sandbox
from bench.incremental import truth_logs, workspace_of
from pipelines.lake import Lake
from pipelines.streams.comment import TRIGGER_LOGS
from pipelines.warehouse.relations import warehouse_of

DATA = ROOT / "data" / "bench" / "warehouse"
UNPACED = {"comment": {"pace": False}}
TARGET_RATIO = 2.0
TARGET_HOURLY_RATIO = 1.2
SIMULATED_DAYS = 30
ROUNDS = 5

QUERIES = {
    "last 30 days by day, literal bound": (
        "SELECT date, count(*), count(*) FILTER (WHERE status = 'failed') FROM {logs} "
        "WHERE date >= DATE '{since_30}' GROUP BY date ORDER BY date"
    ),
    "last 30 days by day, subquery bound": (
        "SELECT date, count(*) FROM {logs} WHERE date >= (SELECT max(date) FROM {logs}) - 30 "
        "GROUP BY date ORDER BY date"
    ),
    "a year by activity and status": (
        "SELECT activity_id, status, count(*) FROM {logs} GROUP BY ALL ORDER BY ALL"
    ),
    "one log by id": "SELECT * FROM {logs} WHERE id = '{some_id}'",
    "distinct commenters per month": (
        "SELECT date_trunc('month', date) AS month, count(DISTINCT username) FROM {logs} "
        "GROUP BY 1 ORDER BY 1"
    ),
    "join with activities, last 7 days": (
        "SELECT a.name, count(*) FROM {logs} l JOIN {activities} a "
        "ON a.connection = l.connection AND a.id = l.activity_id "
        "WHERE l.date >= DATE '{since_7}' GROUP BY 1 ORDER BY 1"
    ),
}


def timed(run: Callable[[], list]) -> tuple[float, list]:
    started = time.perf_counter()
    rows = run()
    return time.perf_counter() - started, rows


def compare_queries(con: duckdb.DuckDBPyConnection, path: Path, today: date) -> list[dict]:
    """Each query through the views of the warehouse file at `path`, attached read-only to
    `con` (an in-memory DuckDB), and against native copies of the same rows in `con`'s own
    database: medians of `ROUNDS`, alternating."""
    con.execute(f"ATTACH '{path}' AS warehouse (READ_ONLY)")
    con.execute("CREATE SCHEMA memory.native")
    copy = "CREATE TABLE memory.native.{0} AS SELECT * FROM warehouse.comment.{0}"
    con.execute(copy.format("trigger_logs"))
    con.execute(copy.format("activities"))
    con.execute("USE warehouse")
    [(some_id,)] = con.execute(
        "SELECT id FROM memory.native.trigger_logs ORDER BY date, id LIMIT 1 OFFSET 500000"
    ).fetchall()
    values = {
        "since_30": today - timedelta(days=30),
        "since_7": today - timedelta(days=7),
        "some_id": some_id,
    }
    rows = []
    for name, template in QUERIES.items():
        views = template.format(
            logs="comment.trigger_logs", activities="comment.activities", **values
        )
        native = template.format(
            logs="memory.native.trigger_logs", activities="memory.native.activities", **values
        )
        seconds: dict[str, list[float]] = {"views": [], "native": []}
        answers = {}
        for sql, side in ((views, "views"), (native, "native")):
            answers[side] = sorted(map(repr, con.execute(sql).fetchall()))  # warm-up
        for _ in range(ROUNDS):
            for sql, side in ((views, "views"), (native, "native")):
                elapsed, _ = timed(lambda sql=sql: con.execute(sql).fetchall())
                seconds[side].append(elapsed)
        view_ms = statistics.median(seconds["views"]) * 1000
        native_ms = statistics.median(seconds["native"]) * 1000
        rows.append(
            {
                "query": name,
                "views ms": round(view_ms, 1),
                "native ms": round(native_ms, 1),
                "ratio": round(view_ms / native_ms, 2),
                "equal": answers["views"] == answers["native"],
            }
        )
    return rows


def simulate_month(lake: Lake, warehouse_path: Path, today: date) -> list[float]:
    """The last `SIMULATED_DAYS` days as hourly landings leave the warehouse: each day, that
    day's and the day before's files written again, then the refresh a landing asks for.
    The seconds of each refresh."""
    seconds = []
    for back in range(SIMULATED_DAYS, -1, -1):
        day = today - timedelta(days=back)
        written = set()
        for landed in (day - timedelta(days=1), day):
            for path in lake.files(TRIGGER_LOGS, [landed]):
                table = lake.read_table(path)
                connection = Path(path).stem
                with lake.writer(TRIGGER_LOGS, connection, landed) as out:
                    out.write_table(table)
            written.add((TRIGGER_LOGS.relation, landed))
        warehouse = warehouse_of(lake.place.uri, warehouse_path, ())
        warehouse.clock = lambda day=day: day
        elapsed, _ = timed(lambda warehouse=warehouse, written=written: warehouse.refresh(written))
        seconds.append(elapsed)
    return seconds


def week_old_copy(year: Path, week: Path, today: date) -> None:
    """The year-old lake's last 7 days of trigger logs, and its other streams whole."""
    shutil.rmtree(week, ignore_errors=True)
    shutil.copytree(year / "lake", week / "lake", ignore=shutil.ignore_patterns("date=*"))
    kept = {f"date={today - timedelta(days=n)}" for n in range(7)}
    logs = year / "lake" / "comment" / "trigger_logs"
    for folder in logs.iterdir():
        if folder.name in kept:
            shutil.copytree(folder, week / "lake" / "comment" / "trigger_logs" / folder.name)


def hourly_args(today: date) -> list[str]:
    """The hourly run: yesterday and today of the trigger logs."""
    yesterday = today - timedelta(days=1)
    return [
        *("cli", "sync", "--streams", TRIGGER_LOGS.relation),
        *("--start", yesterday.isoformat(), "--end", today.isoformat()),
    ]


def hourly_runs(envs: dict[str, dict[str, str]], today: date, rounds: int) -> list[dict]:
    args = hourly_args(today)
    figures: dict[str, dict[str, list[float]]] = {lake: {"wall": [], "cpu": []} for lake in envs}
    for env in envs.values():
        measured_run(args, env)  # warm-up: the views built once
    for _ in range(rounds):
        for lake, env in envs.items():
            measured = measured_run(args, env)
            if measured.exit_code:
                raise RuntimeError(f"the hourly sync on the {lake} lake failed")
            figures[lake]["wall"].append(measured.wall_seconds)
            figures[lake]["cpu"].append(measured.cpu_seconds)
    medians = {
        lake: {name: statistics.median(values) for name, values in got.items()}
        for lake, got in figures.items()
    }
    year, week = medians["year-old"], medians["week-old"]
    return [
        {
            "figure": name,
            "year-old": round(year[name], 2),
            "week-old": round(week[name], 2),
            "ratio": round(year[name] / week[name], 2),
            "target": f"<= {TARGET_HOURLY_RATIO}",
        }
        for name in ("wall", "cpu")
    ]


class Counted(logging.Handler):
    """Counts the requests the local S3 server logs (werkzeug's line per request)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.requests += 1


@contextmanager
def local_store() -> Iterator[tuple[str, Counted]]:
    """A local S3 server (moto, the dev group's, as the tests' store) with a bucket `bench`,
    the AWS variables set for it in this process, and its request counter."""
    from moto.server import ThreadedMotoServer

    counted = Counted()
    werkzeug = logging.getLogger("werkzeug")
    werkzeug.addHandler(counted)
    werkzeug.propagate = False  # counted, not printed
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench-secret",
        AWS_ENDPOINT_URL=endpoint,
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    try:
        pafs.S3FileSystem(
            endpoint_override=endpoint, region="us-east-1", allow_bucket_creation=True
        ).create_dir("bench")
        yield endpoint, counted
    finally:
        server.stop()
        werkzeug.removeHandler(counted)


def upload(folder: Path, endpoint: str, prefix: str) -> None:
    fs = pafs.S3FileSystem(endpoint_override=endpoint, region="us-east-1")
    # One object at a time: moto's server loses objects uploaded in parallel.
    pafs.copy_files(str(folder), f"bench/{prefix}", pafs.LocalFileSystem(), fs, use_threads=False)


def on_object_store(
    year: Path, week: Path, envs: dict[str, dict[str, str]], today: date, rounds: int
) -> tuple[list[dict], list[dict]]:
    """The same queries with the lake in a local S3 server, and the hourly run's requests to
    the store on the year-old and the week-old lake there."""
    with local_store() as (endpoint, counted):
        upload(year / "lake", endpoint, "year")
        upload(week / "lake", endpoint, "week")
        path = DATA / "s3-warehouse.duckdb"
        warehouse = warehouse_of("s3://bench/year", path, ())
        warehouse.refresh()
        with warehouse.lake.connect() as con:
            queries = compare_queries(con, path, today)
        stored = {
            lake: {
                **env,
                **{k: v for k, v in os.environ.items() if k.startswith("AWS_")},
                "LAKE_ROOT": f"s3://bench/{lake.split('-')[0]}",
                "WAREHOUSE_PATH": str(DATA / f"s3-{lake}.duckdb"),
            }
            for lake, env in envs.items()
        }
        requests: dict[str, list[int]] = {lake: [] for lake in stored}
        for env in stored.values():
            measured_run(hourly_args(today), env, DATA)  # warm-up: the views built once
        for _ in range(rounds):
            for lake, env in stored.items():
                before = counted.requests
                if measured_run(hourly_args(today), env, DATA).exit_code:
                    raise RuntimeError(f"the hourly sync on the stored {lake} lake failed")
                requests[lake].append(counted.requests - before)
    year_requests = statistics.median(requests["year-old"])
    week_requests = statistics.median(requests["week-old"])
    hourly = {
        "figure": "requests to the store",
        "year-old": year_requests,
        "week-old": week_requests,
        "ratio": round(year_requests / week_requests, 2),
        "target": f"<= {TARGET_HOURLY_RATIO}",
    }
    return queries, [hourly]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.warehouse", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the hourly runs")
    args = parser.parse_args(argv)
    shutil.rmtree(DATA, ignore_errors=True)
    year = DATA / "year"
    with sandbox("--no-rate-limits") as base:
        env = pipeline_env(base, year, ("comment",), UNPACED)
        full = measured_run(
            ["cli", "sync", "--streams", TRIGGER_LOGS.relation, "comment.activities"], env
        )
        if full.exit_code:
            raise RuntimeError("the year's sync failed")
        truth = truth_logs(base, workspace_of(base))
        today = datetime.now(UTC).date()
        lake = Lake(year / "lake")
        refreshes = simulate_month(lake, Path(env["WAREHOUSE_PATH"]), today)
        with duckdb.connect() as con:
            queries = compare_queries(con, Path(env["WAREHOUSE_PATH"]), today)
            [(landed,)] = con.execute("SELECT count(*) FROM comment.trigger_logs").fetchall()
        week = DATA / "week"
        week_old_copy(year, week, today)
        week_env = pipeline_env(base, week, ("comment",), UNPACED)
        print_table("queries (local lake)", queries)  # before the store's part, which is long
        hourly = hourly_runs({"year-old": env, "week-old": week_env}, today, args.rounds)
        print_table("hourly run", hourly)
        envs = {"year-old": env, "week-old": week_env}
        object_store, stored_hourly = on_object_store(year, week, envs, today, args.rounds)
    hourly += stored_hourly
    for row in queries:
        row["target"] = f"<= {TARGET_RATIO}"
    report(
        "warehouse",
        queries,
        tables={"on the local S3 server (no target)": object_store, "hourly run": hourly},
        trigger_logs={"landed": landed, "truth": truth},
        warehouse_mb=round(Path(env["WAREHOUSE_PATH"]).stat().st_size / 2**20, 1),
        daily_refresh_s={
            "median": round(statistics.median(refreshes), 2),
            "max": round(max(refreshes), 2),
        },
        year_sync_s=round(full.wall_seconds, 1),
        year_sync_peak_mb=round(full.peak_rss_mb),
    )
    correct = landed == truth and all(row["equal"] for row in queries + object_store)
    met = all(row["ratio"] <= TARGET_RATIO for row in queries) and all(
        row["ratio"] <= TARGET_HOURLY_RATIO for row in hourly
    )
    print(f"\n  data equal to the truth: {correct}; targets met: {met}")
    return 0 if correct else 1


if __name__ == "__main__":
    raise SystemExit(main())
