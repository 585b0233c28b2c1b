"""`python -m bench.agent`: the AI agent callback's answer time at 20 concurrent
conversations.

The receiver runs as a user runs it (`python -m pipelines.agent --port P`, a fresh random
token in `AGENT_TOKEN`, the inbox beside a temporary `LAKE_ROOT`), answering with the default
reply, or with `--reply module:function` against the demo shop's warehouse, built for the run
as `make demo` builds it: the data hub members of an in-process sandbox in the lake, the
shop's tables (demo/shop.py), the demo's views (demo/sql).

The turns are the sandbox's own (`AgentTurns.turn`, sandbox/conversation/agent.py): one per
member message of both regions' history (version 1.1 with the region's prompt, and 1.0), each
the conversation up to that message, so every request is a distinct turn. Each of the
`--concurrency` workers, an `httpx.AsyncClient` of its own on one kept-alive connection,
posts the next turn once it has the answer to its last; an answer's time is from the post to
its last byte.

Afterwards: every answer 200 with a `reply_text`; the inbox holds each turn once with its
answer, nothing rejected, and no answer says the reply function failed or overran.

Target: p99 answer time under 250 ms at 20 concurrent conversations, with the default reply.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np

import demo
from bench.common import ROOT, commit, free_port, machine, report, stop, wait_for_health
from bench.webhooks import cpu_seconds, peak_rss_mb, percentile
from demo.shop import generate_shop
from pipelines.agent.inbox import INBOX_VARIABLE, inbox_path
from pipelines.agent.receiver import AGENT_PATH, TOKEN_VARIABLE
from pipelines.agent.reply import (
    DEADLINE_VARIABLE,
    DEFAULT_TEXT_VARIABLE,
    HANDOVER,
    REPLY_VARIABLE,
)
from pipelines.lake import Lake
from pipelines.pull.landing import today
from pipelines.registry import WAREHOUSE_STREAMS
from pipelines.state.shared_store import STORE_VARIABLE
from pipelines.streams.datahub import MEMBERS
from pipelines.warehouse import SQL_DIR, Warehouse
from sandbox.app import SandboxApp, build_app
from sandbox.config import SandboxConfig
from sandbox.conversation import ConversationService
from sandbox.conversation.agent import MEMBER
from sandbox.encoding import json_bytes

CONCURRENCY = 20
REQUESTS = 2_000
WARMUP = 200
TARGET_P99_MS = 250.0
#: The service waits this long for an answer (pipelines/agent/reply.py, `SERVICE_LIMIT`).
DEADLINE_S = 45.0
#: Medium: about 58,000 member messages per region, enough distinct turns for any run.
SCALE = "medium"
#: The sandbox's history ends here, so a seed gives the same turns on any day.
ANCHOR = datetime(2026, 11, 1, 12, tzinfo=UTC)
REGIONS = ("default", "jp")
#: Settings of the receiver this benchmark decides, whatever the caller's environment holds.
RECEIVER_SETTINGS = (
    TOKEN_VARIABLE,
    REPLY_VARIABLE,
    DEFAULT_TEXT_VARIABLE,
    DEADLINE_VARIABLE,
    INBOX_VARIABLE,
    STORE_VARIABLE,
    "LAKE_ROOT",
    "WAREHOUSE_PATH",
)


@dataclass
class Answer:
    status: int  # 0: no answer (a transport error)
    reply_text: str | None
    seconds: float


# -- what is sent --------------------------------------------------------------------------


def sandbox_turns(app: SandboxApp, count: int, seed: int) -> list[bytes]:
    """`count` distinct turns of the sandbox's, the two regions' alternating."""
    rng = np.random.default_rng(seed)
    per_region = [region_turns(app.services[("conversation", r)], rng) for r in REGIONS]
    turns = []
    while len(turns) < count:
        for bodies in per_region:
            turns.append(json_bytes(next(bodies)))  # the bytes the service sends
    return turns[:count]


def region_turns(service: ConversationService, rng: np.random.Generator) -> Iterator[dict]:
    """The region's turns, one per member message in a random order (in a 1.0 region an
    image starts none)."""
    rows = rng.permutation(np.flatnonzero(service.messages.table["kind"] == MEMBER))
    for row in rows.tolist():
        body = service.agent_turns.turn(row)
        if body is not None:
            yield body


def demo_warehouse(app: SandboxApp, lake: Lake, path: Path) -> None:
    """The demo's warehouse over the sandbox's data hub members and the shop made from
    them, as `make demo` has it after its sync (tests/demo/test_shop.py builds it alike)."""
    names = set(MEMBERS.schema.names)
    members = [
        {name: value for name, value in contact.items() if name in names}
        | {"connection": "default"}
        for page in app.services[("datahub", "default")].hub.contacts.snapshot().rows()
        for contact in page
    ]
    lake.write(MEMBERS, "default", members, day=today())
    generate_shop(lake)
    Warehouse(path, lake, WAREHOUSE_STREAMS, SQL_DIR, extra_sql=[demo.SQL_DIR]).refresh()


# -- the receiver process ------------------------------------------------------------------


@contextmanager
def receiver(data: Path, token: str, reply: str | None) -> Iterator[tuple[str, int]]:
    """`python -m pipelines.agent` on a free port; (its URL, its pid). Its output goes to a
    file, not a pipe: a pipe nobody reads stops the receiver once full."""
    env = {name: value for name, value in os.environ.items() if name not in RECEIVER_SETTINGS}
    env |= {
        TOKEN_VARIABLE: token,
        "LAKE_ROOT": str(data / "lake"),
        "WAREHOUSE_PATH": str(data / "warehouse.duckdb"),
        "PYTHONPATH": str(ROOT),
    }
    if reply:
        env[REPLY_VARIABLE] = reply
    port = free_port()
    log = data / "receiver.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pipelines.agent", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(base, process, log, 60)
        yield base, process.pid
    finally:
        stop(process, 10)


# -- sending -------------------------------------------------------------------------------


async def send_all(url: str, token: str, turns: list[bytes], concurrency: int) -> list[Answer]:
    """`concurrency` workers, each with a client of its own, each posting the next turn
    once it has the answer to its last."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    queue = iter(turns)  # shared: each worker takes the next one
    answers: list[Answer] = []
    # All made before the first post: making one loads the CA certificates (~25 ms), which
    # would count in the answer times of the workers already posting.
    clients = [httpx.AsyncClient(timeout=DEADLINE_S) for _ in range(concurrency)]

    async def worker(client: httpx.AsyncClient) -> None:
        async with client:
            for body in queue:
                started = time.perf_counter()
                try:
                    response = await client.post(url, content=body, headers=headers)
                except httpx.HTTPError:
                    answers.append(Answer(0, None, time.perf_counter() - started))
                    continue
                seconds = time.perf_counter() - started
                answers.append(Answer(response.status_code, reply_text(response), seconds))

    await asyncio.gather(*(worker(client) for client in clients))
    return answers


def reply_text(response: httpx.Response) -> str | None:
    if response.status_code != 200:
        return None
    text = response.json().get("reply_text")
    return text if isinstance(text, str) else None


# -- checks --------------------------------------------------------------------------------


def check(answers: list[Answer], sent: int, data: Path) -> dict:
    """Every answer 200 with a reply; the inbox holds each turn once, answered by the
    default reply or the function, nothing rejected. Raises on any failure."""
    statuses = Counter(answer.status for answer in answers)
    if set(statuses) != {200} or any(answer.reply_text is None for answer in answers):
        raise AssertionError(f"answers other than 200 with a reply_text: {dict(statuses)}")
    path = inbox_path(data / "lake", env={})
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        requests = db.execute("SELECT count(*) FROM requests").fetchone()[0]
        rejected = db.execute("SELECT count(*) FROM rejected").fetchone()[0]
        outcomes = dict(db.execute("SELECT outcome, count(*) FROM answers GROUP BY 1").fetchall())
    if requests != sent or sum(outcomes.values()) != sent or rejected:
        raise AssertionError(
            f"inbox: {requests} requests, {outcomes} answers, {rejected} rejected; {sent} sent"
        )
    if set(outcomes) - {"default", "replied"}:
        raise AssertionError(f"the reply function failed, overran or gave no text: {outcomes}")
    return {"inbox_requests": requests, "outcomes": outcomes}


# -- the figure ----------------------------------------------------------------------------


def prepare(args: argparse.Namespace, data: Path) -> list[bytes]:
    """The turns to send and, for a reply function, the demo's warehouse."""
    # A region makes turns only with an agent configured; nothing is sent to this one.
    config = SandboxConfig(
        scale=SCALE, frozen=True, now=ANCHOR, agent_url="http://unused", agent_token="-"
    )
    app = build_app(config)
    try:
        turns = sandbox_turns(app, args.warmup + args.requests, args.seed)
        if args.reply:
            demo_warehouse(app, Lake(data / "lake"), data / "warehouse.duckdb")
    finally:
        app.sandbox.webhooks.close()
    return turns


def measure(args: argparse.Namespace, data: Path) -> tuple[dict, dict]:
    """Run the receiver, send the turns, check; (the table's row, the details)."""
    turns = prepare(args, data)
    # The sandbox's objects are freed now, not by a collection that pauses the senders.
    gc.collect()
    warmup, measured = turns[: args.warmup], turns[args.warmup :]
    token = secrets.token_hex(32)  # fresh per run; never printed or written
    with receiver(data, token, args.reply) as (base, pid):
        url = f"{base}{AGENT_PATH}"
        warm = asyncio.run(send_all(url, token, warmup, args.concurrency))
        cpu_receiver, cpu_senders = cpu_seconds(pid), time.process_time()
        started = time.perf_counter()
        answers = asyncio.run(send_all(url, token, measured, args.concurrency))
        wall = time.perf_counter() - started
        cpu_receiver = cpu_seconds(pid) - cpu_receiver
        cpu_senders = time.process_time() - cpu_senders
        rss = peak_rss_mb(pid)
    checked = check(warm + answers, len(turns), data)
    ordered = sorted(answer.seconds * 1000 for answer in answers)
    p99 = percentile(ordered, 0.99)
    row = {
        "reply": args.reply or "default",
        "concurrency": args.concurrency,
        "requests": len(answers),
        "requests/s": round(len(answers) / wall, 1),
        "p50 ms": round(percentile(ordered, 0.50), 1),
        "p95 ms": round(percentile(ordered, 0.95), 1),
        "p99 ms": round(p99, 1),
        "max ms": round(ordered[-1], 1),
        "mean ms": round(statistics.fmean(ordered), 1),
        "handovers": sum(HANDOVER in answer.reply_text for answer in answers),
        "receiver peak RSS MB": round(rss, 1),
        "target": f"p99 < {TARGET_P99_MS:g} ms",
        "met": "yes" if p99 < TARGET_P99_MS else "no",
    }
    messages = [len(json.loads(body)["messages"]) for body in measured]
    details = {
        "warmup": args.warmup,
        "wall_seconds": round(wall, 2),
        "messages_per_turn": {"mean": round(statistics.fmean(messages), 2), "max": max(messages)},
        # What bounds it: the receiver is one Python process, about one core under the GIL.
        "receiver_cores_busy": round(cpu_receiver / wall, 2),
        "receiver_cpu_ms_per_request": round(cpu_receiver / len(answers) * 1000, 3),
        "senders_cores_busy": round(cpu_senders / wall, 2),  # this process: on the same cores
        "load_average": os.getloadavg(),
        "checked": checked,
    }
    return row, details


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agent", description=__doc__)
    parser.add_argument("--requests", type=int, default=REQUESTS, help="measured turns")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--warmup", type=int, default=WARMUP)
    parser.add_argument(
        "--reply", help="module:function answering instead of the default reply (AGENT_REPLY)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--json", type=Path, help="write the result here instead of bench/results (tests)"
    )
    args = parser.parse_args(argv)
    # Under data/, not /tmp: the inbox fsyncs, so it must sit on a real disk, not tmpfs.
    (ROOT / "data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-agent-", dir=ROOT / "data") as tmp:
        row, details = measure(args, Path(tmp))
    if args.json:
        result = {"rows": [row], "commit": commit(), "machine": machine(), **details}
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    else:
        report("agent" if args.reply is None else "agent-reply", [row], **details)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
