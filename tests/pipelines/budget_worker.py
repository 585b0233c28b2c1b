"""What a worker process of `test_budget.py` runs: paced calls on the comment key through a
budget store. Apart from the tests (and light: no Dagster), so each process starts fast."""

from __future__ import annotations

import os

from pipelines.clients.base import Connection
from pipelines.clients.comment import CommentAutomation
from pipelines.state.budget import STORE_VARIABLE
from pipelines.transport import CallStats, ServiceError

COMMENT_KEY = "sa_live_demo_readonly"
#: The sandbox's and the pacer's window for the comment limit: 120 requests per 10 s. Long
#: against a busy machine's scheduling jitter: the pacer's 2 % headroom is 200 ms of it (a
#: request sent that late after its slot, with two more as late, could meet a 429).
WINDOW = 10.0


def comment_service(url: str) -> CommentAutomation:
    return CommentAutomation(
        connections=[Connection(name="default", base_url=url, api_key=COMMENT_KEY)],
        rate_window_seconds=WINDOW,
        retry_attempts=1,  # a 429 is counted, not waited out
    )


def call_me(url: str, settings: dict[str, str], calls: int, ready, go, results) -> None:
    """`calls` paced GET /me on the comment key with `settings` in the environment (the
    budget store, or none: the default), once `go` is set; puts (requests sent, requests
    refused) on `results`."""
    os.environ.pop(STORE_VARIABLE, None)
    os.environ.update(settings)
    service = comment_service(url)
    stats, refused = CallStats(), 0
    with service.transport(service.connections[0], stats) as transport:
        ready.set()
        go.wait(120)
        for _ in range(calls):
            try:
                transport.request_json("GET", "/me")
            except ServiceError:
                refused += 1
    results.put((stats.requests, refused))
