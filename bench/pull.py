"""`python -m bench.pull`: pull throughput and peak memory, beside the floor.

On a frozen `--scale large` sandbox with its rate limits off (and the pipeline's pacing off),
for the full trigger log history of one workspace (1,100,000 logs) and the message history
of one conversation region (1,050,000 messages):

- the pipeline: `python -m cli sync --streams <stream>` in a process of its own, as a
  cron job runs it without DAGSTER_HOME (it lands in its own process, no Dagster run): the
  whole command, start to exit (imports, the run, the warehouse views), its peak
  resident memory, and the stream's own seconds: the command less the same command for
  `comment.workspace` (one request), its fixed cost. The rows landed must equal the truth;
- the floor, in the same run: a bare loop that fetches the same pages (or the same backup
  file) with plain httpx and throws the bytes away, one request at a time; and the same loop
  keeping as many requests in flight as the pipeline's read-ahead does.

Memory must not grow with the history: the trigger logs are also pulled for 30 days alone
and both peaks are reported.
"""

from __future__ import annotations

import argparse
import math
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import httpx

from bench.common import (
    COMMENT_KEY,
    ROOT,
    SERVICE_KEY,
    measured_run,
    pipeline_env,
    report,
    sandbox,
)
from pipelines.clients.comment import LOGS_MAX_DAYS, LOGS_PAGE_LIMIT
from pipelines.clients.conversation import PATHS, ConversationClient
from pipelines.lake import Lake
from pipelines.pull.paging import READ_AHEAD_PAGES
from pipelines.transport import Transport

DATA = ROOT / "data" / "bench" / "pull"
UNPACED = {"comment": {"pace": False}, "conversation": {"pace": False}}
TARGET_RATIO = 1.25
TARGET_PEAK_MB = 300


def bare_logs(base: str, in_flight: int) -> tuple[float, int]:
    """Fetch every page of the served year and drop it; (seconds, pages)."""
    with httpx.Client(
        base_url=f"{base}/comment/api/v1",
        headers={"Authorization": f"Bearer {COMMENT_KEY}"},
        timeout=60,
    ) as client:

        def fetch(page: int) -> int:
            params = {"days": LOGS_MAX_DAYS, "page": page, "limit": LOGS_PAGE_LIMIT}
            return len(client.get("/logs", params=params).raise_for_status().content)

        started = time.perf_counter()
        total = client.get("/logs", params={"days": LOGS_MAX_DAYS, "limit": 1}).json()["total"]
        pages = math.ceil(total / LOGS_PAGE_LIMIT)
        with ThreadPoolExecutor(in_flight) as pool:
            for _ in pool.map(fetch, range(pages)):
                pass
        return time.perf_counter() - started, pages + 1


def bare_messages(base: str, days: int) -> tuple[float, int]:
    """Trigger the same backup the pipeline does (the last `days` days), wait for it and
    download the file, dropping the bytes; (seconds, bytes)."""
    end = datetime.combine(date.today() + timedelta(days=1), datetime.min.time(), UTC)
    started = time.perf_counter()
    with Transport(
        f"{base}/conversation", {"apikey": SERVICE_KEY}, api_key=SERVICE_KEY
    ) as transport:
        client = ConversationClient(transport, PATHS, backup_deadline_seconds=600)
        backup_id = client.trigger_messages_backup(end - timedelta(days=days), end).backup_id
        client.wait_for_backup(backup_id)
        size = client.download_backup(backup_id, lambda chunks: sum(len(c) for c in chunks))
    return time.perf_counter() - started, size


def pipeline(base: str, name: str, stream: str, services: tuple[str, ...], *range_) -> dict:
    data = DATA / name
    shutil.rmtree(data, ignore_errors=True)
    env = pipeline_env(base, data, services, UNPACED)
    env.pop("DAGSTER_HOME")  # as cron runs it: no Dagster run, no event log on disk
    argv = ["cli", "sync", "--streams", stream, *range_]
    measured = measured_run(argv, env)
    if measured.exit_code:
        raise RuntimeError(f"{' '.join(argv)} exited {measured.exit_code}")
    with duckdb.connect(env["WAREHOUSE_PATH"], read_only=True) as con:
        [(rows,)] = con.execute(f"SELECT count(*) FROM {stream}").fetchall()
    files = Path(Lake(env["LAKE_ROOT"]).root).glob("**/*.parquet")
    return {
        "rows": rows,
        "wall_s": measured.wall_seconds,
        "peak_rss_mb": measured.peak_rss_mb,
        "lake_mb": sum(f.stat().st_size for f in files) / 2**20,
    }


def truth(base: str) -> dict:
    return httpx.get(f"{base}/_sandbox/truth", timeout=120).raise_for_status().json()


def workspace_of(base: str) -> str:
    answer = httpx.get(
        f"{base}/comment/api/v1/me", headers={"Authorization": f"Bearer {COMMENT_KEY}"}
    )
    return answer.raise_for_status().json()["workspace"]["id"]


def row(
    what: str, landed: dict, fixed_s: float, expected: int, floor_s: float, floor_ahead_s: float
) -> dict:
    stream_s = landed["wall_s"] - fixed_s
    ratio = stream_s / floor_s
    return {
        "stream": what,
        "rows": landed["rows"],
        "equals truth": landed["rows"] == expected,
        "command s": landed["wall_s"],
        "stream s": stream_s,
        "rows/s": landed["rows"] / stream_s,
        "peak RSS MB": landed["peak_rss_mb"],
        "lake MB": landed["lake_mb"],
        "bare loop s": floor_s,
        f"bare, {READ_AHEAD_PAGES} in flight s": floor_ahead_s,
        "stream / bare": ratio,
        "command / bare": landed["wall_s"] / floor_s,
        "target": f"<= {TARGET_RATIO}, < {TARGET_PEAK_MB} MB",
        "met": ratio <= TARGET_RATIO and landed["peak_rss_mb"] < TARGET_PEAK_MB,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pull", description=__doc__)
    parser.add_argument("--scale", default="large")
    args = parser.parse_args(argv)
    with sandbox("--no-rate-limits", scale=args.scale) as base:
        known = truth(base)
        logs_expected = known["comment"][workspace_of(base)]["trigger_logs"]
        messages_expected = known["conversation"]["default"]["messages"]
        # The floor first and last around the pipeline, so a machine that slows down midway
        # shows as a spread between the two rather than as pipeline cost.
        fixed = pipeline(base, "fixed-cost", "comment.workspace", ("comment",))
        logs_floor = [bare_logs(base, 1)[0]]
        logs_ahead = bare_logs(base, READ_AHEAD_PAGES)[0]
        last_30 = (date.today() - timedelta(days=29)).isoformat()
        month = pipeline(
            base, "logs-30-days", "comment.trigger_logs", ("comment",), "--start", last_30
        )
        year = pipeline(base, "logs", "comment.trigger_logs", ("comment",))
        logs_floor.append(bare_logs(base, 1)[0])

        message_days = 366  # the pipeline's full-sync history of messages (docs/running.md)
        messages_floor = bare_messages(base, message_days)[0]
        messages = pipeline(base, "messages", "conversation.messages", ("conversation",))
    rows = [
        row(
            "comment.trigger_logs (365 days)",
            year,
            fixed["wall_s"],
            logs_expected,
            min(logs_floor),
            logs_ahead,
        ),
        row(
            "conversation.messages (366 days)",
            messages,
            fixed["wall_s"],
            messages_expected,
            messages_floor,
            messages_floor,
        ),
    ]
    report(
        "pull",
        rows,
        fixed_cost={"command": "sync --streams comment.workspace", **fixed},
        bare_loop_trigger_logs_runs_s=[round(s, 2) for s in logs_floor],
        trigger_logs_30_days={"rows": month["rows"], "peak_rss_mb": round(month["peak_rss_mb"], 1)},
        memory_growth_30_to_365_days_mb=round(year["peak_rss_mb"] - month["peak_rss_mb"], 1),
    )
    return 0 if all(r["equals truth"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
