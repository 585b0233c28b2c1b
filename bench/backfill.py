"""`python -m bench.backfill`: requests of a trigger log backfill beside its pages.

On a frozen sandbox with rate limits and pacing off, each backfill starts from an empty lake
and runs `python -m cli sync --streams comment.trigger_logs --start D --end D2`:

- the 365 days the service serves (today - 364 .. today);
- an older slice (300 .. 200 days ago), where the pipeline skips the newer pages by a binary
  search on one-row pages instead of reading them.

Requests to `/logs` (counted by the sandbox) against ceil(rows / 200), rows being the rows
landed: target within 5 %. The rows landed must be the truth's rows of the window: as many
as the service counts in it, each a trigger log of the truth, none twice, all in the window.
"""

from __future__ import annotations

import argparse
import math
import shutil
from datetime import UTC, date, datetime, timedelta

import duckdb
import httpx

from bench.common import COMMENT_KEY, ROOT, pipeline_env, report, sandbox, traffic
from bench.incremental import requests_of, run_sync, workspace_of
from pipelines.clients.comment import LOGS_MAX_DAYS, LOGS_PAGE_LIMIT
from pipelines.pull.paging import READ_AHEAD_PAGES

DATA = ROOT / "data" / "bench" / "backfill"
UNPACED = {"comment": {"pace": False}}
TARGET_OVERHEAD = 0.05
#: The older slice, in days before today (both ends included).
SLICE = (300, 200)


def service_count(base: str, first_day_ago: int, last_day_ago: int) -> int:
    """Logs the service holds in the window: `days=N` covers the last N UTC days."""

    def total(days: int) -> int:
        if days == 0:
            return 0
        answer = httpx.get(
            f"{base}/comment/api/v1/logs",
            params={"days": days, "limit": 1},
            headers={"Authorization": f"Bearer {COMMENT_KEY}"},
        )
        return answer.raise_for_status().json()["total"]

    return total(first_day_ago + 1) - total(last_day_ago)


def backfill(base: str, name: str, first: date, last: date, truth_ids: set[str]) -> dict:
    data = DATA / name
    shutil.rmtree(data, ignore_errors=True)
    env = pipeline_env(base, data, ("comment",), UNPACED)
    traffic(base, reset=True)
    wall = run_sync(
        env,
        "--streams",
        "comment.trigger_logs",
        "--start",
        first.isoformat(),
        "--end",
        last.isoformat(),
    )
    seen = traffic(base)
    with duckdb.connect(env["WAREHOUSE_PATH"], read_only=True) as con:
        [(rows, distinct, oldest, newest)] = con.execute(
            "SELECT count(*), count(DISTINCT id), min(date), max(date) FROM comment.trigger_logs"
        ).fetchall()
        ids = {
            row_id for (row_id,) in con.execute("SELECT id FROM comment.trigger_logs").fetchall()
        }
    today = datetime.now(UTC).date()
    expected = service_count(base, (today - first).days, (today - last).days)
    correct = (
        rows == expected == distinct
        and ids <= truth_ids
        and (rows == 0 or first <= oldest and newest <= last)
    )
    pages = math.ceil(rows / LOGS_PAGE_LIMIT)
    requests = requests_of(seen, "comment.trigger_logs")
    overhead = requests / pages - 1 if pages else float("inf")
    return {
        "backfill": f"{first} .. {last}",
        "days": (last - first).days + 1,
        "rows": rows,
        "rows = truth": correct,
        "requests /logs": requests,
        "ceil(rows/200)": pages,
        "overhead": requests - pages,
        "overhead %": 100 * overhead,
        "target": f"<= {TARGET_OVERHEAD:.0%}",
        "met": overhead <= TARGET_OVERHEAD,
        "other requests": seen.count() - requests,
        "wall s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backfill", description=__doc__)
    parser.add_argument("--scale", default="large")
    args = parser.parse_args(argv)
    today = datetime.now(UTC).date()
    with sandbox("--no-rate-limits", scale=args.scale) as base:
        workspace = workspace_of(base)
        truth_ids = set(
            httpx.get(f"{base}/_sandbox/truth/comment/{workspace}/trigger_logs/ids", timeout=300)
            .raise_for_status()
            .json()["ids"]
        )
        year = backfill(base, "year", today - timedelta(days=LOGS_MAX_DAYS - 1), today, truth_ids)
        year["rows = truth"] = year["rows = truth"] and year["rows"] == len(truth_ids)
        older = backfill(
            base,
            "older-slice",
            today - timedelta(days=SLICE[0]),
            today - timedelta(days=SLICE[1]),
            truth_ids,
        )
    rows = [year, older]
    report(
        "backfill",
        rows,
        scale=args.scale,
        truth_trigger_logs=len(truth_ids),
        overhead_by_design={
            "365 days": "1 request: the check rows_equal_service_total asks for the total",
            "older slice": "the first page (its total sizes the search), the binary search "
            "probes (one-row pages, about log2 of the pages of the 301-day list), the page "
            "holding the window's newest rows also holds newer ones, the read-ahead may ask "
            f"up to {READ_AHEAD_PAGES} pages past the window's end, and the check's 1",
        },
        figures_may_be_noisy="2 cores shared with other benchmarks",
    )
    return 0 if all(r["rows = truth"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
