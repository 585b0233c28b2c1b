"""`python -m bench.peer [--rounds 3]`: the pipeline beside its peer (dlt) and the floor (bare
httpx), the same work in one run, so every change is judged against them on the same machine
at the same moment.

On one frozen `--scale large` sandbox with its rate limits off (and the pipeline's pacing off),
each contender is a whole command in a process of its own (`bench.measure`): its wall time,
its CPU (user + system, of the process and its children) and its peak resident memory:

- trigger logs, the 365 days served (1,100,000 logs): `python -m cli sync --streams
  comment.trigger_logs`; dlt (`bench/peer_dlt.py`); bare loops with 1 and 4 requests in
  flight (`bench/bare.py`);
- one request, the fixed cost: `sync --streams comment.workspace`; dlt, the same request; the
  bare request;
- message backup, 366 days in one CSV file: `sync --streams conversation.messages`; the bare
  download of the same backup;
- member export, the data hub's export file: `sync --streams datahub.members`; the bare
  download of the same export.

Each floor the pipeline is measured against (4 in flight, the one request, the downloads) is
also run as the body of a Dagster asset, materialized as the pipeline's are
(`bench/in_dagster.py`, "… in Dagster"): what Dagster alone adds, which no change of the
pipeline's code can remove.

Every run starts from an empty destination, and what it fetched is checked against the
sandbox's truth (rows landed, and distinct ids for trigger logs, in the warehouse, in dlt's
DuckDB, counted by the bare loop or in the file it downloaded): a contender that fetched
nothing or too much fails the figure (exit code 1) and cannot win. Over several rounds the
order rotates (the works, and the contenders within each), and the table shows medians, the
ratios of the medians, and the issue's targets beside them. The pipeline runs as cron runs
it, without `DAGSTER_HOME`: it lands in its own process with no Dagster run
(`pipelines/stream_run.py`).

dlt comes from the `bench` dependency group (`make bench` installs it; `make test` does not).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import httpx

from bench import bare
from bench.common import COMMENT_KEY, ROOT, measured_run, pipeline_env, report, sandbox
from pipelines.clients import conversation, datahub
from pipelines.clients.comment import LOGS_MAX_DAYS, LOGS_PAGE_LIMIT
from pipelines.pull.paging import READ_AHEAD_PAGES

DATA = ROOT / "data" / "bench" / "peer"
SERVICES = ("comment", "conversation", "datahub")
UNPACED = {service: {"pace": False} for service in SERVICES}
#: The pipeline's full-sync history of messages (docs/running.md).
MESSAGE_DAYS = 366

# The floor fetches what the pipeline fetches.
for _operation, _path in bare.CONVERSATION_PATHS.items():
    assert conversation.PATHS[_operation] == _path, _operation
for _operation, _path in bare.DATAHUB_PATHS.items():
    assert datahub.PATHS[_operation] == _path, _operation


@dataclass(frozen=True)
class Contender:
    work: str
    name: str
    service: str
    #: `python -m` arguments, given the run's data folder.
    argv: Callable[[Path], list[str]]
    #: (rows, distinct keys) it fetched, read after the run from what it left in its folder.
    fetched: Callable[[Path], tuple[int, int]]


def warehouse_rows(relation: str, key: str) -> Callable[[Path], tuple[int, int]]:
    def fetched(data: Path) -> tuple[int, int]:
        with duckdb.connect(str(data / "warehouse.duckdb"), read_only=True) as con:
            query = f"SELECT count(*), count(DISTINCT {key}) FROM {relation}"
            return con.execute(query).fetchone()

    return fetched


def dlt_rows(table: str) -> Callable[[Path], tuple[int, int]]:
    def fetched(data: Path) -> tuple[int, int]:
        with duckdb.connect(str(data / "peer.duckdb"), read_only=True) as con:
            query = f"SELECT count(*), count(DISTINCT id) FROM comment.{table}"
            return con.execute(query).fetchone()

    return fetched


def bare_rows(data: Path) -> tuple[int, int]:
    """The rows the bare loop counted; it keeps no ids (it drops each body)."""
    rows = json.loads((data / "fetched.json").read_text())["rows"]
    return rows, rows


def file_rows(data: Path) -> tuple[int, int]:
    """Records of the downloaded CSV file (texts hold line breaks), less its header."""
    csv.field_size_limit(sys.maxsize)
    with (data / "file.csv").open(newline="", encoding="utf-8", errors="replace") as file:
        records = sum(1 for _ in csv.reader(file)) - 1
    return records, records


def sync(stream: str) -> Callable[[Path], list[str]]:
    return lambda data: ["cli", "sync", "--streams", stream]


def floor(
    work: str, name: str, service: str, what: str, *options: str, in_dagster: bool = False
) -> Contender:
    """A bare floor (`bench/bare.py`), or the same run as a Dagster asset
    (`bench/in_dagster.py`, named "… in Dagster"): what it fetched, counted."""
    module = "bench.in_dagster" if in_dagster else "bench.bare"
    downloads = what in ("messages_backup", "member_export")

    def argv(data: Path) -> list[str]:
        file = [str(data / "file.csv")] if downloads else []
        return [module, what, str(data / "fetched.json"), *file, *options]

    name = f"{name} in Dagster" if in_dagster else name
    return Contender(work, name, service, argv, file_rows if downloads else bare_rows)


LOG_PAGES = ["--days", str(LOGS_MAX_DAYS), "--limit", str(LOGS_PAGE_LIMIT)]
BACKUP_DAYS = ("--days", str(MESSAGE_DAYS))
FLOOR = f"bare, {READ_AHEAD_PAGES} in flight"
WORKS: dict[str, list[Contender]] = {
    "trigger logs": [
        Contender(
            "trigger logs",
            "pipeline",
            "comment",
            sync("comment.trigger_logs"),
            warehouse_rows("comment.trigger_logs", "id"),
        ),
        Contender(
            "trigger logs",
            "dlt",
            "comment",
            lambda data: ["bench.peer_dlt", "trigger_logs", str(data), *LOG_PAGES],
            dlt_rows("trigger_logs"),
        ),
        floor("trigger logs", "bare, 1 in flight", "comment", "trigger_logs", *LOG_PAGES),
        *(
            floor(
                "trigger logs",
                FLOOR,
                "comment",
                "trigger_logs",
                *LOG_PAGES,
                "--in-flight",
                str(READ_AHEAD_PAGES),
                in_dagster=in_dagster,
            )
            for in_dagster in (False, True)
        ),
    ],
    "one request": [
        Contender(
            "one request",
            "pipeline",
            "comment",
            sync("comment.workspace"),
            warehouse_rows("comment.workspace", "id"),
        ),
        Contender(
            "one request",
            "dlt",
            "comment",
            lambda data: ["bench.peer_dlt", "workspace", str(data)],
            dlt_rows("workspace"),
        ),
        *(
            floor("one request", "bare", "comment", "workspace", in_dagster=in_dagster)
            for in_dagster in (False, True)
        ),
    ],
    "message backup": [
        Contender(
            "message backup",
            "pipeline",
            "conversation",
            sync("conversation.messages"),
            warehouse_rows("conversation.messages", "message_uuid"),
        ),
        *(
            floor(
                "message backup",
                "bare download",
                "conversation",
                "messages_backup",
                *BACKUP_DAYS,
                in_dagster=in_dagster,
            )
            for in_dagster in (False, True)
        ),
    ],
    "member export": [
        Contender(
            "member export",
            "pipeline",
            "datahub",
            sync("datahub.members"),
            warehouse_rows("datahub.members", "member_id"),
        ),
        *(
            floor(
                "member export", "bare download", "datahub", "member_export", in_dagster=in_dagster
            )
            for in_dagster in (False, True)
        ),
    ],
}
#: (work, contender measured, contender it is divided by, figure, target ratio or bound).
TARGETS = [
    ("trigger logs", "pipeline", FLOOR, "wall_s", 1.2),
    ("trigger logs", "pipeline", "dlt", "wall_s", 0.67),
    ("trigger logs", "pipeline", "dlt", "cpu_s", 0.5),  # the same rows: CPU per row
    ("trigger logs", "pipeline", None, "peak_rss_mb", 300),
    ("one request", "pipeline", None, "wall_s", 2.0),
    ("one request", "pipeline", "dlt", "wall_s", None),
    ("message backup", "pipeline", "bare download", "wall_s", 1.2),
    ("member export", "pipeline", "bare download", "wall_s", 1.2),
    # What Dagster alone costs each work: the floors run as a Dagster asset, over the floors.
    ("trigger logs", f"{FLOOR} in Dagster", FLOOR, "wall_s", None),
    ("one request", "bare in Dagster", None, "wall_s", None),
    ("message backup", "bare download in Dagster", "bare download", "wall_s", None),
    ("member export", "bare download in Dagster", "bare download", "wall_s", None),
]
FIGURES = {"wall_s": "wall", "cpu_s": "CPU per row", "peak_rss_mb": "peak RSS MB"}


def rotated(items: list, by: int) -> list:
    by %= len(items)
    return items[by:] + items[:by]


def expected_rows(base: str) -> dict[str, int]:
    """The truth of each work, for the `default` connection of its service."""
    truth = httpx.get(f"{base}/_sandbox/truth", timeout=120).raise_for_status().json()
    headers = {"Authorization": f"Bearer {COMMENT_KEY}"}
    me = httpx.get(f"{base}/comment/api/v1/me", headers=headers, timeout=30)
    workspace = truth["comment"][me.raise_for_status().json()["workspace"]["id"]]
    return {
        "trigger logs": workspace["trigger_logs"],
        "one request": workspace["workspace"],
        "message backup": truth["conversation"]["default"]["messages"],
        "member export": truth["datahub"]["default"]["members"],
    }


def run(base: str, contender: Contender, expected: int) -> dict:
    slug = f"{contender.work}-{contender.name}".replace(" ", "-").replace(",", "")
    data = DATA / slug
    shutil.rmtree(data, ignore_errors=True)
    env = pipeline_env(base, data, (contender.service,), UNPACED)
    env.pop("DAGSTER_HOME")  # as cron runs it: no Dagster run, no event log on disk
    measured = measured_run(contender.argv(data), env)
    if measured.exit_code:
        raise RuntimeError(f"{contender.work}, {contender.name}: exited {measured.exit_code}")
    rows, distinct = contender.fetched(data)
    return {
        "rows": rows,
        "equals truth": rows == distinct == expected,
        "wall_s": measured.wall_seconds,
        "cpu_s": measured.cpu_seconds,
        "peak_rss_mb": measured.peak_rss_mb,
    }


def summary(work: str, name: str, runs: list[dict], expected: int) -> dict:
    wall, cpu, rss = (statistics.median(r[k] for r in runs) for k in FIGURES)
    rows = runs[0]["rows"]
    return {
        "work": work,
        "contender": name,
        "rows": rows,
        "truth": expected,
        "equals truth": all(r["equals truth"] for r in runs),
        "wall s": wall,
        "CPU s": cpu,
        "CPU us/row": cpu / rows * 1e6 if rows > 1 else None,
        "peak RSS MB": rss,
    }


def medians(runs: dict[tuple[str, str], list[dict]], work: str, name: str) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs[work, name]) for k in FIGURES}


def target_rows(runs: dict[tuple[str, str], list[dict]]) -> list[dict]:
    rows = []
    for work, name, against, figure, target in TARGETS:
        if (work, name) not in runs or (against and (work, against) not in runs):
            continue
        value = medians(runs, work, name)[figure]
        if against:
            value /= medians(runs, work, against)[figure]
        # A contender whose rows were wrong in any round wins nothing.
        sides = [runs[work, name], runs[work, against]] if against else [runs[work, name]]
        rows_right = all(r["equals truth"] for side in sides for r in side)
        met = (value <= target if target else None) if rows_right else "no: rows wrong"
        what = f"{work}: {name} {FIGURES[figure]}" + (f" / {against}" if against else "")
        unit = "" if against else (" s" if figure == "wall_s" else " MB")
        rows.append(
            {
                "measure": what,
                "measured": f"{value:.2f}{unit}",
                "target": f"<= {target}{unit}" if target else "(reported)",
                "met": met,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peer", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", default="large")
    parser.add_argument("--works", nargs="+", choices=list(WORKS), default=list(WORKS))
    args = parser.parse_args(argv)
    runs: dict[tuple[str, str], list[dict]] = {}
    every_run = []
    with sandbox("--no-rate-limits", scale=args.scale) as base:
        expected = expected_rows(base)
        for round_ in range(args.rounds):
            for work in rotated(args.works, round_):
                for contender in rotated(WORKS[work], round_):
                    result = run(base, contender, expected[work])
                    runs.setdefault((work, contender.name), []).append(result)
                    every_run.append(
                        {"round": round_ + 1, "work": work, "contender": contender.name, **result}
                    )
                    print(every_run[-1], flush=True)
    rows = [summary(work, name, results, expected[work]) for (work, name), results in runs.items()]
    rows.sort(key=lambda row: list(WORKS).index(row["work"]))
    report(
        "peer",
        rows,
        tables={
            "targets (medians, ratios of the medians)": target_rows(runs),
            "every run, in the order run": every_run,
        },
        rounds=args.rounds,
        scale=args.scale,
    )
    return 0 if all(row["equals truth"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
