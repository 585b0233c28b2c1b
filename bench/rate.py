"""`python -m bench.rate`: how much of the comment automation rate limit a trigger log pull uses.

The sandbox enforces the documented 120 requests per minute per key, time-scaled to 120 per
5 s (`--rate-window 5`), and the pipeline paces itself to the same window
(`[service.comment] rate_window_seconds = 5`). It pulls enough days of trigger logs for
about 1,000 requests (30-60 s): `python -m cli sync --streams comment.trigger_logs
--start D --end today`, from an empty lake.

Share of the budget = requests accepted on the comment mount / (120 x span / 5), span being
first to last request as the sandbox saw them; 429s = what its limiter refused. Target: at
least 95 % used, no 429. The pacer (pipelines/transport/ `Pacer`) spaces requests evenly at
the limit less 2 % headroom, so about 98 % is the designed ceiling.

The run ends with the check `rows_equal_service_total`, one more request after the landing:
the sandbox's counts are sampled while the sync runs, so the share is also given over the
paging alone (first to last page), without the pause before that last request.
"""

from __future__ import annotations

import argparse
import math
import shutil
import threading
import time
from datetime import UTC, datetime, timedelta

import duckdb
import httpx

from bench.common import COMMENT_KEY, ROOT, pipeline_env, report, sandbox, traffic
from bench.incremental import requests_of, run_sync
from pipelines.clients.comment import LOGS_MAX_DAYS, LOGS_PAGE_LIMIT, REQUESTS_PER_MINUTE

DATA = ROOT / "data" / "bench" / "rate"
WINDOW_S = 5
MOUNT = "/comment/api/v1"
LOGS_PATH = f"{MOUNT}/logs"
#: Requests wanted: at 98 % of 120 per 5 s, about 42 s of paging.
TARGET_REQUESTS = 1_000
TARGET_SHARE = 0.95
HEADROOM = 0.02  # the Pacer's (pipelines/transport/)


def logs_total(base: str, days: int) -> int:
    answer = httpx.get(
        f"{base}{MOUNT}/logs",
        params={"days": days, "limit": 1},
        headers={"Authorization": f"Bearer {COMMENT_KEY}"},
    )
    return answer.raise_for_status().json()["total"]


class Sampler:
    """Reads the sandbox's /logs count every `every` seconds while the sync runs, keeping
    the moment (sandbox monotonic) of the last request seen at each count."""

    def __init__(self, base: str, every: float = 0.2) -> None:
        self.base, self.every = base, every
        self.last_at: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=10) as client:
            while not self._stop.wait(self.every):
                paths = client.get("/_sandbox/requests").json()["paths"]
                logs = next((p for p in paths if p["path"] == LOGS_PATH), None)
                if logs:
                    self.last_at[logs["count"]] = logs["last"]

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rate", description=__doc__)
    parser.add_argument("--scale", default="large")
    args = parser.parse_args(argv)
    shutil.rmtree(DATA, ignore_errors=True)
    today = datetime.now(UTC).date()
    with sandbox("--rate-window", str(WINDOW_S), scale=args.scale) as base:
        per_day = logs_total(base, LOGS_MAX_DAYS) / LOGS_MAX_DAYS
        days = max(1, min(LOGS_MAX_DAYS, round(TARGET_REQUESTS * LOGS_PAGE_LIMIT / per_day)))
        first = today - timedelta(days=days - 1)
        env = pipeline_env(base, DATA, ("comment",), {"comment": {"rate_window_seconds": WINDOW_S}})
        time.sleep(WINDOW_S)  # our own request above leaves the limiter's window
        traffic(base, reset=True)
        with Sampler(base) as sampler:
            wall = run_sync(env, "--streams", "comment.trigger_logs", "--start", first.isoformat())
        seen = traffic(base)
        expected = logs_total(base, days)
    with duckdb.connect(env["WAREHOUSE_PATH"], read_only=True) as con:
        [(rows, distinct)] = con.execute(
            "SELECT count(*), count(DISTINCT id) FROM comment.trigger_logs"
        ).fetchall()

    sent = seen.count(MOUNT)
    accepted = sent - seen.refused
    span = seen.span(MOUNT)
    share = accepted / (REQUESTS_PER_MINUTE * span / WINDOW_S)
    logs = next(p for p in seen.paths if p["path"] == LOGS_PATH)
    # The paging alone: up to the last page, seen by a sample taken before the check's request.
    last_page = sampler.last_at.get(logs["count"] - 1)
    paging_share = None
    if last_page is not None and sent == logs["count"]:
        paging_span = last_page - logs["first"]
        paging_share = (accepted - 1) / (REQUESTS_PER_MINUTE * paging_span / WINDOW_S)
    rows_out = [
        {
            "pull": f"trigger logs, {days} days",
            "rows": rows,
            "rows = truth": rows == distinct == expected,
            "requests": sent,
            "429s": seen.refused,
            "span s": span,
            "budget in span": REQUESTS_PER_MINUTE * span / WINDOW_S,
            "share used %": 100 * share,
            "paging only %": None if paging_share is None else 100 * paging_share,
            "designed ceiling %": 100 / (1 + HEADROOM),
            "target": f">= {TARGET_SHARE:.0%}, no 429",
            "met": share >= TARGET_SHARE and seen.refused == 0,
        }
    ]
    report(
        "rate",
        rows_out,
        scale=args.scale,
        limit=f"{REQUESTS_PER_MINUTE} requests per {WINDOW_S} s per key (time-scaled 120/min)",
        pacer=f"even spacing at the limit less {HEADROOM:.0%} headroom "
        "(pipelines/transport/ Pacer): about 98 % is the designed ceiling",
        requests_of_trigger_logs=requests_of(seen, "comment.trigger_logs"),
        expected_requests=math.ceil(rows / LOGS_PAGE_LIMIT) + 1,
        pause_before_check_s=None if last_page is None else round(logs["last"] - last_page, 2),
        wall_s=round(wall, 1),
        figures_may_be_noisy="2 cores shared with other benchmarks",
    )
    return 0 if rows_out[0]["rows = truth"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
