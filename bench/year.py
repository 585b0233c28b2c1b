"""`python -m bench.year`: what an hourly cycle of the product costs as its lake ages from a
week to a year (bench/README.md, "A year of hourly cycles").

The world: a small live sandbox (`--scale small`, seed 7, rate limits off, the pipeline
unpaced) whose clock this bench moves (`POST /_sandbox/clock/advance`), its history on the
`HISTORY_DAYS` days before the start and the lake starting there too (`SYNC_START_DATE`), so
the lake is a week old on its first day; new trigger logs, messages, member changes and a
campaign every `CAMPAIGN_MINUTES` arrive as the clock moves. Both receivers serve it as a
user runs them (`python -m pipelines.webhooks`, `python -m pipelines.agent`), and the demo
shop (`demo/shop.py`, `--customers`) is the source the push sends from. Every command runs on
the sandbox's clock (`bench/clocked.py`): the product takes "today" from the clock.

An hourly cycle, each command in a process of its own as cron runs it (no DAGSTER_HOME):
the clock +1 h; a few loyalty balances of the shop changed (`--changes`); `python -m
cli sync` (every stream, the receivers' inboxes compacted); `python -m cli push`;
then `python -m cli sync --streams datahub.webhook_events conversation.agent_requests`,
the receivers' compaction, which lands the `*.sync` webhooks the push caused. Measured per
command (`bench.common.measured_run`: wall, user + system CPU, peak RSS), with the requests
the services saw (`/_sandbox/requests`), on the object store the store's requests, the
receivers' CPU meanwhile, and the lake's files after the cycle, in total and in its
bookkeeping folders.

A year without 8,760 cycles: the first day (the first sync, the shop written, its first
push), then at each of `--points` points `--cycles-per-point` cycles measured from 22:00
(the second crosses midnight: it closes a day), the first point a day after the start and
each next one `--step-days` later. Before each point the clock moves in catch-up runs of
`--catch-up-hours` each (a sync and a push in one process of their own, not measured; every
change of the shop pushed), so the lake gains every day's data files, the ledger every
change, and the run history a file for each day a run started on (a file a day with the
default 24 h); what differs from a year of hourly runs is said in bench/README.md.

At the end, what landed is checked against the sandbox's truth: every closed day of trigger
logs and messages the services still serve, every webhook delivered, every agent turn, the
last pushed balances; a difference exits 1. Then `--pairs` rounds of the same commands (a
push, the compaction, a one-request sync) on a copy of the first point's lake and on the
last point's, one after the other: the machine is shared, and a year of points measured
an hour apart meets different loads, which pairs share. Data under data/bench/year/<store>
(git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx

from bench.common import (
    ROOT,
    free_port,
    measured_run,
    pipeline_env,
    print_table,
    stop,
    traffic,
    wait_for_health,
    write_document,
)
from sandbox.process import running_sandbox

DATA = ROOT / "data" / "bench" / "year"
SERVICES = ("comment", "conversation", "datahub")
UNPACED = {service: {"pace": False} for service in SERVICES}
#: Days of the sandbox's history before the start, and of the lake at the first point.
HISTORY_DAYS = 7
#: New rows a minute per live stream (logs, messages, member changes): about 29 a day, a
#: small shop's pace (the small scale's history is 6,000 logs a year).
ARRIVALS_PER_MINUTE = 0.02
#: A campaign every two days per region: each is a broadcast and its few dozen webhooks.
CAMPAIGN_MINUTES = 2 * 24 * 60
#: The hour the measured cycles start from: the first runs at 23:00, the second at midnight.
START_HOUR = 22
#: The receivers' compaction: one relation of each receiver selects its inbox.
COMPACTION = ("datahub.webhook_events", "conversation.agent_requests")
#: The lake's bookkeeping folders (pipelines/lake/run_history.py, pipelines/streams/pushed.py,
#: pipelines/lake/footers.py, pipelines/lake/watermarks.py).
BOOKKEEPING = {
    "runs": "sync/runs",
    "ledger": "sync/pushed",
    "push_state": "sync/push_state",
    "_footers": "_footers",
    "_watermarks": "_watermarks",
}
#: The shop's changes file beside its generated table: `<lake>/shop/points/changes.parquet`.
CHANGES = "changes"
#: How long the receivers' inboxes must stay unchanged to count as caught up, and at most.
SETTLE_SECONDS, SETTLE_LIMIT = 1.0, 60.0
WAIT_SECONDS = 300


# -- the clock -------------------------------------------------------------------------------


def sandbox_now(base: str) -> datetime:
    return datetime.fromisoformat(httpx.get(f"{base}/_sandbox/clock", timeout=30).json()["now"])


def advance_to(base: str, moment: datetime, clock_file: Path) -> datetime:
    """The sandbox's clock to `moment` (it also moves with the wall, so the step is what is
    left), and the receivers told (the file they follow, replaced whole); its new now."""
    gap = (moment - sandbox_now(base)).total_seconds()
    if gap > 0:
        httpx.post(
            f"{base}/_sandbox/clock/advance", params={"seconds": gap}, timeout=600
        ).raise_for_status()
    now = sandbox_now(base)
    written = clock_file.with_suffix(".tmp")
    written.write_text(now.isoformat())
    written.replace(clock_file)
    return now


def start_moment(hour: int) -> datetime:
    """The next `hour`:00 UTC after the wall clock's now: the simulated clock then never
    runs behind the wall, whose times the lake's files carry (a merge deletes the files it
    replaced once its own file is old enough: pipelines/lake/merge.py)."""
    now = datetime.now(UTC)
    start = now.replace(hour=hour, minute=0, second=0, microsecond=0)
    return start if start > now else start + timedelta(days=1)


# -- the shop's changes ----------------------------------------------------------------------


def change_points(lake_root: str, count: int, until: datetime, hours: int) -> list[dict]:
    """`count` new versions of the shop's loyalty balances, spread evenly over the `hours`
    before `until`, appended to the shop's changes file: each takes the next customer in
    turn, its balance 10 more than its last. Returns the rows added."""
    from demo.shop import POINTS
    from pipelines.lake import Lake

    lake = Lake(lake_root)
    latest: dict[str, dict] = {}
    generated = lake.read_table(lake.path(POINTS, "shop")).to_pylist()
    for row in sorted(generated, key=lambda r: r["timestamp"]):
        if row["type"] == "loyalty_point":
            latest[row["source_platform_customer_id"]] = row
    customers = sorted(latest)
    path = lake.path(POINTS, CHANGES)
    kept = lake.read_table(path).to_pylist() if lake.exists(path) else []
    added = []
    for i in range(count):
        n = len(kept) + i
        customer = customers[n % len(customers)]
        # Strictly later than the change before it, so the newest version is never in doubt.
        at = until - timedelta(seconds=int((count - 1 - i) * hours * 3600 / count))
        balance = latest[customer]["balance"] + 10.0 * (n // len(customers) + 1)
        added.append(latest[customer] | {"timestamp": at, "balance": balance})
    lake.write(POINTS, CHANGES, kept + added)
    return added


# -- the receivers ---------------------------------------------------------------------------


@contextmanager
def receiver(module: str, clock_file: Path, env: dict[str, str], log: Path) -> Iterator[dict]:
    """`python -m <module> --port P` as a user runs it, on the sandbox's clock (the agent's
    turns land on the day they were received); yields its URL and process."""
    port = free_port()
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.clocked", str(clock_file), module, "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(base, process, log, 120)
        yield {"url": base, "process": process}
    finally:
        stop(process, 30)


def operations(seen) -> Counter:
    """Requests per operation: method and path, its ids as `{id}` (`bench.soak`)."""
    from bench.soak import ID_IN_PATH

    counts: Counter = Counter()
    for entry in seen.paths:
        counts[f"{entry['method']} {ID_IN_PATH.sub('/{id}', entry['path'])}"] += entry["count"]
    return counts


def process_cpu(pid: int) -> float:
    """User and system CPU seconds of one process, all its threads (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def inbox_paths(env: dict[str, str]) -> tuple[str, str]:
    """Where the webhook inbox and the agent inbox are (SQLite files beside the lake)."""
    from pipelines.agent.inbox import inbox_path as agent_inbox
    from pipelines.webhooks.inbox import inbox_path as webhook_inbox

    return str(webhook_inbox(env["LAKE_ROOT"], env)), str(agent_inbox(env["LAKE_ROOT"], env))


def inbox_rows(env: dict[str, str]) -> tuple[int, int]:
    """Rows in the webhook inbox and the agent inbox (0 before a receiver's first row)."""
    counts = []
    webhooks, agent = inbox_paths(env)
    for path, sql in (
        (Path(webhooks), "SELECT count(*) FROM events"),
        (Path(agent), "SELECT (SELECT count(*) FROM requests) + (SELECT count(*) FROM answers)"),
    ):
        if not path.exists():
            counts.append(0)
            continue
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as con:
            counts.append(con.execute(sql).fetchone()[0])
    return counts[0], counts[1]


def settle(env: dict[str, str]) -> None:
    """Until the receivers have stored what the sandbox was sending: both inboxes unchanged
    for `SETTLE_SECONDS` (at most `SETTLE_LIMIT`)."""
    deadline = time.monotonic() + SETTLE_LIMIT
    seen, since = inbox_rows(env), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = inbox_rows(env)
        if now != seen:
            seen, since = now, time.monotonic()
        elif time.monotonic() - since >= SETTLE_SECONDS:
            return


# -- the lake --------------------------------------------------------------------------------


def lake_files(lake_root: str) -> dict[str, float]:
    """The lake's files: in total, in each bookkeeping folder, and their size."""
    import pyarrow.fs as pafs

    from pipelines.lake import Lake

    lake = Lake(lake_root)
    selector = pafs.FileSelector(lake.root, recursive=True, allow_not_found=True)
    infos = [info for info in lake.fs.get_file_info(selector) if info.is_file]
    names = [info.path[len(lake.root) :].lstrip("/") for info in infos]
    return {
        "files": len(infos),
        **{
            name: sum(n.startswith(f"{prefix}/") for n in names)
            for name, prefix in BOOKKEEPING.items()
        },
        "lake MB": round(sum(info.size for info in infos) / 2**20, 2),
    }


# -- the world and its cycles ----------------------------------------------------------------


@dataclass
class World:
    """The sandbox, the receivers, the product's environment, and what was measured."""

    base: str
    data: Path
    env: dict[str, str]
    clock_file: Path
    receivers: dict[str, dict]
    first_day: date
    #: The local S3 server's request counter, on the object store.
    store: object | None = None
    cycles: list[dict] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    catch_ups: list[dict] = field(default_factory=list)
    pair_runs: list[dict] = field(default_factory=list)

    def advance_to(self, moment: datetime) -> datetime:
        return advance_to(self.base, moment, self.clock_file)

    def store_requests(self) -> int:
        return self.store.requests if self.store is not None else 0

    def command(self, *args: str, lake: Copy | None = None, at: datetime | None = None) -> dict:
        """`python -m cli <args>` in a process of its own on the sandbox's clock (or at
        `at`, ticking from there), on the lake (or on `lake`, a copy), measured; the requests
        the services and the store saw meanwhile. A command that fails stops the bench: the
        figures of a broken cycle mean nothing."""
        env, data = (self.env, self.data) if lake is None else (lake.env, lake.data)
        traffic(self.base, reset=True)
        store_before = self.store_requests()
        moment = (at or sandbox_now(self.base)).isoformat()
        measured = measured_run(["bench.clocked", moment, "cli", *args], env, data)
        log = (data / "output.log").read_text(errors="replace")
        seen = operations(traffic(self.base, reset=True))
        if measured.exit_code:
            raise RuntimeError(f"cli {' '.join(args)} exited {measured.exit_code}:\n{log}")
        return {
            "wall s": round(measured.wall_seconds, 2),
            "CPU s": round(measured.cpu_seconds, 2),
            "peak RSS MB": round(measured.peak_rss_mb, 1),
            "requests": sum(seen.values()),
            "store requests": self.store_requests() - store_before if self.store else None,
            "output": log,
            "operations": dict(seen.most_common()),
        }

    def receivers_cpu(self) -> float:
        return sum(process_cpu(r["process"].pid) for r in self.receivers.values())

    def cycle(self, point: int, moment: datetime, changes: int) -> dict:
        """One hourly cycle at `moment`: the shop's changes, sync, push, compaction."""
        from bench.push_history import printed_figures

        self.advance_to(moment)
        change_points(self.env["LAKE_ROOT"], changes, moment, 1)
        settle(self.env)  # what the hour brought is in the inboxes, as it would be by now
        receivers = self.receivers_cpu()
        steps = {"sync": self.command("sync"), "push": self.command("push")}
        pushed = printed_figures(self.data / "output.log")
        settle(self.env)  # the push's `*.sync` webhooks
        steps["compaction"] = self.command("sync", "--streams", *COMPACTION)
        receivers = self.receivers_cpu() - receivers
        age = (moment.date() - self.first_day).days
        for name, step in steps.items():
            step.pop("output")
            self.steps.append(
                {"point": point, "at": f"{moment:%Y-%m-%d %H:%M}", "step": name, **step}
            )
        row = {
            "point": point,
            "at": f"{moment:%Y-%m-%d %H:%M}",
            "age d": age,
            "wall s": round(sum(s["wall s"] for s in steps.values()), 2),
            "CPU s": round(sum(s["CPU s"] for s in steps.values()), 2),
            "peak MB": max(s["peak RSS MB"] for s in steps.values()),
            **{f"{name} CPU s": s["CPU s"] for name, s in steps.items()},
            "receivers CPU s": round(receivers, 2),
            "requests": sum(s["requests"] for s in steps.values()),
            **(
                {"store requests": sum(s["store requests"] for s in steps.values())}
                if self.store
                else {}
            ),
            "sent": pushed["sent"],
            **lake_files(self.env["LAKE_ROOT"]),
        }
        if pushed["sent"] != changes:
            row["unexpected"] = f"the push sent {pushed['sent']} records, not {changes}"
        self.cycles.append(row)
        print_table(f"cycle at {row['at']}", [row])
        return row

    def catch_up(self, start: datetime, until: datetime, hours: int, changes: int) -> dict:
        """The clock from `start` to `until` in runs of `hours`, each a sync and a push, in
        one process of its own (not measured: it only brings the lake where a year of
        hourly runs would have it)."""
        started = time.perf_counter()
        runs = self.data / "catch-up-runs.jsonl"
        runs.unlink(missing_ok=True)
        with open(self.data / "catch-up.log", "a") as log:
            finished = subprocess.run(
                [
                    sys.executable,
                    *("-m", "bench.year", "--catch-up", self.base, str(self.clock_file)),
                    *(start.isoformat(), until.isoformat(), str(hours), str(changes), str(runs)),
                ],
                env=self.env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if finished.returncode:
            raise RuntimeError(f"the catch-up to {until} failed: see {self.data}/catch-up.log")
        each = [json.loads(line) for line in runs.read_text().splitlines()]
        figures = {
            "from": f"{start:%Y-%m-%d %H:%M}",
            "to": f"{until:%Y-%m-%d %H:%M}",
            "runs": len(each),
            "wall s": round(time.perf_counter() - started, 1),
            **{
                name: round(sum(run[name] for run in each), 1)
                for name in ("sync wall s", "sync CPU s", "push wall s", "push CPU s")
            },
        }
        self.catch_ups.append(figures)
        return figures

    def snapshot(self) -> Copy:
        """A copy of everything a run reads, as it is now: the lake, the warehouse, the push's
        journal and lease, the inboxes (copied through SQLite: the receivers keep writing
        theirs), the key budgets; at this moment, for the pairs at the end."""
        import sqlite3 as sqlite

        import pyarrow.fs as pafs

        from pipelines.lake import Lake

        copy = self.data / "week-old"
        local = self.env["LAKE_ROOT"] == str(self.data / "lake")
        shutil.copytree(
            self.data,
            copy,
            ignore=shutil.ignore_patterns(copy.name, "lake", "*.sqlite3*", "*.log", "*.json*"),
        )
        lake = Lake(self.env["LAKE_ROOT"])
        root = str(copy / "lake") if local else f"{self.env['LAKE_ROOT']}-week-old"
        copied = Lake(root)
        # One file at a time: moto's server loses objects uploaded in parallel.
        pafs.copy_files(lake.root, copied.root, lake.fs, copied.fs, use_threads=False)
        env = self.env | {
            "LAKE_ROOT": root,
            "WAREHOUSE_PATH": str(copy / "warehouse.duckdb"),
            "XDG_STATE_HOME": str(copy / "state"),
        }
        for inbox in (Path(p) for p in inbox_paths(self.env)):
            if inbox.exists():
                into = copy / inbox.relative_to(self.data)
                with sqlite.connect(inbox) as source, sqlite.connect(into) as target:
                    source.backup(target)
        return Copy(env, copy, sandbox_now(self.base))

    def pairs(self, week: Copy, rounds: int, changes: int) -> list[dict]:
        """The same commands on the week-old copy (on its own clock) and on the year-old lake
        (on the sandbox's), one after the other, `rounds` times after a round that warms both
        up: a push of `changes` changed balances, the receivers' compaction, and a sync of one
        request (`comment.workspace`: the sync's own bookkeeping, whatever the lake holds).
        Side by side, so that the machine's load weighs on both alike."""
        year = Copy(self.env, self.data, sandbox_now(self.base))
        commands = {
            "push": ("push",),
            "compaction": ("sync", "--streams", *COMPACTION),
            "one-request sync": ("sync", "--streams", "comment.workspace"),
        }
        runs: list[dict] = []
        for n in range(rounds + 1):
            for name, lake in (("week-old", week), ("year-old", year)):
                at = lake.at + timedelta(hours=n + 1)
                change_points(lake.env["LAKE_ROOT"], changes, at, 1)
                for command, args in commands.items():
                    figures = self.command(*args, lake=lake, at=at)
                    figures.pop("output")
                    if n:
                        runs.append({"lake": name, "command": command, **figures})
        rows = []
        for command in commands:
            week_runs = [r for r in runs if r["command"] == command and r["lake"] == "week-old"]
            year_runs = [r for r in runs if r["command"] == command and r["lake"] == "year-old"]
            ratios = [y["CPU s"] / w["CPU s"] for w, y in zip(week_runs, year_runs, strict=True)]
            rows.append(
                {
                    "command": command,
                    "CPU s, week-old": statistics.median(r["CPU s"] for r in week_runs),
                    "CPU s, year-old": statistics.median(r["CPU s"] for r in year_runs),
                    "year / week CPU": round(statistics.median(ratios), 2),
                    "per pair": ", ".join(f"{r:.2f}" for r in ratios),
                    "wall s, week-old": statistics.median(r["wall s"] for r in week_runs),
                    "wall s, year-old": statistics.median(r["wall s"] for r in year_runs),
                    "peak MB, week-old": statistics.median(r["peak RSS MB"] for r in week_runs),
                    "peak MB, year-old": statistics.median(r["peak RSS MB"] for r in year_runs),
                    **(
                        {
                            "store requests, week-old": statistics.median(
                                r["store requests"] for r in week_runs
                            ),
                            "store requests, year-old": statistics.median(
                                r["store requests"] for r in year_runs
                            ),
                        }
                        if self.store
                        else {}
                    ),
                }
            )
        self.pair_runs = runs
        return rows


@dataclass
class Copy:
    """A lake to run commands on: its environment, its data folder, its clock's moment."""

    env: dict[str, str]
    data: Path
    at: datetime


def run_moments(start: datetime, until: datetime, hours: int) -> list[datetime]:
    """The catch-up's runs: every `hours` back from `until`, after `start`, oldest first (on
    the same hours of each day, whatever the measured cycles took)."""
    moments, moment = [], until
    while moment > start:
        moments.append(moment)
        moment -= timedelta(hours=hours)
    return moments[::-1]


def catch_up_command(argv: list[str]) -> int:
    """`python -m bench.year --catch-up BASE CLOCK_FILE START UNTIL HOURS CHANGES OUT`: the
    runs of a catch-up in this process, its clock the sandbox's. Each run: the clock to the
    run's moment, the shop's changes of the hours since the last run, a sync of every stream
    (the receivers' inboxes compacted), a push. Each run's seconds (wall, and CPU of this
    process) are written to OUT as JSON lines."""
    base, clock_file, start, until, hours, changes, out = argv
    import time_machine

    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")  # as the command sets it
    with time_machine.travel(sandbox_now(base), tick=True) as traveller, open(out, "a") as log:
        from cli.main import run_push_command
        from pipelines import process
        from pipelines.sync import run_sync

        process.prepare()
        last = datetime.fromisoformat(start)
        for moment in run_moments(last, datetime.fromisoformat(until), int(hours)):
            traveller.move_to(advance_to(base, moment, Path(clock_file)))
            elapsed = round((moment - last).total_seconds() / 3600)
            change_points(os.environ["LAKE_ROOT"], int(changes) * elapsed, moment, elapsed)
            figures: dict = {"at": f"{moment:%Y-%m-%d %H:%M}"}
            with timed(figures, "sync"):
                # From the last run's day: the day policy (`days_to_sync`) lands what is
                # missing plus yesterday and today, so after a gap of more than a day the
                # last run's day would keep only what it held then.
                synced = run_sync(start=last.date(), end=moment.date())
            if not synced.ok:
                print(f"{moment}: sync failed: {synced.failed}", flush=True)
                return 1
            with timed(figures, "push"):
                pushed = run_push_command(dry_run=False, record_types=[])
            if pushed:
                print(f"{moment}: push failed", flush=True)
                return 1
            log.write(json.dumps(figures) + "\n")
            log.flush()
            last = moment
    return 0


@contextmanager
def timed(figures: dict, name: str) -> Iterator[None]:
    """The block's wall and CPU seconds (this process's, every thread) into `figures`."""
    wall, cpu = time.perf_counter(), time.process_time()
    yield
    figures[f"{name} wall s"] = round(time.perf_counter() - wall, 2)
    figures[f"{name} CPU s"] = round(time.process_time() - cpu, 2)


# -- the start and the checks ----------------------------------------------------------------


def begin(world: World, customers: int) -> dict:
    """The lake's first day of operation, at the start: the first sync (the history), the
    shop (its customers are the pulled members), its first push, the compaction."""
    from demo.shop import declare_shop, generate_shop
    from pipelines.lake import Lake

    lake = Lake(world.env["LAKE_ROOT"])
    declare_shop(lake)  # the warehouse builds the shop's views before it is written
    steps = {"first sync": world.command("sync")}
    shop = generate_shop(lake, customers=customers)
    steps["first push"] = world.command("push")
    settle(world.env)
    steps["compaction"] = world.command("sync", "--streams", *COMPACTION)
    for step in steps.values():
        step.pop("output")
    return {"shop rows": shop, **steps}


def closed_days(world: World, today: date) -> list[dict]:
    """Every closed day of trigger logs and messages from the lake's first day, lake against
    truth, where the services still serve it; the first day of a window is left out (the
    service serves it in part: sandbox/README.md; the lake landed it whole)."""
    from bench.incremental import workspace_of
    from pipelines.lake import Lake
    from pipelines.streams.comment import TRIGGER_LOGS
    from pipelines.streams.conversation import MESSAGES

    lake = Lake(world.env["LAKE_ROOT"])
    rows = []
    for service, scope, stream in (
        ("comment", workspace_of(world.base), TRIGGER_LOGS),
        ("conversation", "default", MESSAGES),
    ):
        answer = httpx.get(
            f"{world.base}/_sandbox/truth/{service}/{scope}/{stream.name}/days", timeout=120
        )
        truth = {
            date.fromisoformat(d): n for d, n in answer.raise_for_status().json()["days"].items()
        }
        window = sorted(truth)[1:]
        compared = [d for d in window if world.first_day <= d < today]
        landed = dict(
            lake.query(
                f"SELECT date, count(*) FROM {lake.relation(stream)} WHERE connection = 'default' "
                "GROUP BY 1"
            )
        )
        unequal = [
            {"day": d.isoformat(), "lake": landed.get(d, 0), "truth": truth[d]}
            for d in compared
            if landed.get(d, 0) != truth[d]
        ]
        rows.append(
            {
                "stream": stream.relation,
                "closed days": len(compared),
                "rows": sum(truth[d] for d in compared),
                "unequal": len(unequal),
                "unequal days": unequal[:10],
            }
        )
    return rows


def checked(world: World, today: date, last_changes: list[dict]) -> dict:
    """What landed against the sandbox's truth: closed days, every webhook delivered, every
    turn the agent was sent, the last pushed balances."""
    from pipelines.agent.compaction import AGENT_REQUESTS
    from pipelines.lake import Lake
    from pipelines.webhooks.compaction import WEBHOOK_EVENTS, WEBHOOK_QUARANTINE

    wait = {"params": {"wait": WAIT_SECONDS}, "timeout": WAIT_SECONDS + 300}
    sent = httpx.get(f"{world.base}/_sandbox/webhooks", **wait).raise_for_status().json()
    calls = httpx.get(f"{world.base}/_sandbox/agent", **wait).raise_for_status().json()
    settle(world.env)
    world.command("sync", "--streams", *COMPACTION)  # the last of them
    lake = Lake(world.env["LAKE_ROOT"])
    delivered = {d["idempotency_key"] for d in sent["deliveries"] if d["delivered"]}
    landed = {
        key
        for stream in (WEBHOOK_EVENTS, WEBHOOK_QUARANTINE)
        if lake.relation(stream)
        for (key,) in lake.query(f"SELECT DISTINCT idempotency_key FROM {lake.relation(stream)}")
    }
    [(requests, answered)] = lake.query(
        f"SELECT count(*), count(answered_at) FROM {lake.relation(AGENT_REQUESTS)}"
    )
    balances = []
    for row in last_changes:
        key = f"{row['source_platform_customer_id']}:{row['type']}"
        record = httpx.get(f"{world.base}/_sandbox/records/point/{key}", timeout=60).json()
        balances.append(record.get("current", {}).get("balance") == row["balance"])
    return {
        "closed days": closed_days(world, today),
        "webhooks": {
            "delivered": len(delivered),
            "landed": len(landed),
            "missing": len(delivered - landed),
            "not delivered": len(landed - delivered),
            "sandbox idle": sent["idle"],
        },
        "agent": {
            "calls": len(calls["calls"]),
            "answered by the receiver": sum(c["answered"] for c in calls["calls"]),
            "requests landed": requests,
            "answers landed": answered,
            "sandbox idle": calls["idle"],
        },
        "last balances pushed": {"checked": len(balances), "equal": sum(balances)},
    }


def correct(checks: dict, cycles: list[dict]) -> bool:
    webhooks, agent, balances = checks["webhooks"], checks["agent"], checks["last balances pushed"]
    return (
        all(stream["unequal"] == 0 for stream in checks["closed days"])
        and webhooks["missing"] == webhooks["not delivered"] == 0
        and agent["calls"] == agent["requests landed"]
        and agent["answered by the receiver"] == agent["answers landed"]
        and balances["checked"] == balances["equal"]
        and not any("unexpected" in row for row in cycles)
    )


# -- the bench ---------------------------------------------------------------------------------


def first_against_last(cycles: list[dict], per_point: int) -> list[dict]:
    """Each measured figure of the first point's cycles beside the last point's."""
    first, last = cycles[:per_point], cycles[-per_point:]
    rows = []
    for k, (a, b) in enumerate(zip(first, last, strict=True), 1):
        for name, value in a.items():
            if name in ("point", "at") or not isinstance(value, int | float):
                continue
            rows.append(
                {
                    "cycle": f"{k} ({a['at'][-5:]})",
                    "figure": name,
                    "first point": value,
                    "last point": b[name],
                    "last / first": round(b[name] / value, 2) if value else None,
                }
            )
    return rows


def run(args: argparse.Namespace) -> dict:
    data = (args.data or DATA) / args.store
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    started = time.monotonic()
    start = start_moment(START_HOUR)
    first_day = start.date() - timedelta(days=HISTORY_DAYS)
    clock_file = data / "clock"
    clock_file.write_text(start.isoformat())
    # A fresh secret and token per run, through the environment only (never an argument).
    os.environ["WEBHOOK_SECRET"] = secrets.token_hex(24)
    os.environ["AGENT_TOKEN"] = secrets.token_hex(24)
    with ExitStack() as stack:
        store = None
        lake_root = str(data / "lake")
        if args.store == "s3":
            from bench.warehouse import local_store

            _, store = stack.enter_context(local_store())
            lake_root = "s3://bench/year"
        own = {
            "LAKE_ROOT": lake_root,
            "WAREHOUSE_PATH": str(data / "warehouse.duckdb"),
            # The key budgets of this run's own: not the home's, shared with other work.
            "XDG_STATE_HOME": str(data / "state"),
            "PYTHONPATH": str(ROOT),
        }
        receivers = {
            name: stack.enter_context(
                receiver(module, clock_file, os.environ | own, data / f"{name}.log")
            )
            for name, module in (("webhooks", "pipelines.webhooks"), ("agent", "pipelines.agent"))
        }
        base = stack.enter_context(
            running_sandbox(
                free_port(),
                *("--scale", "small", "--now", start.isoformat(), "--no-rate-limits"),
                *("--history-days", str(HISTORY_DAYS)),
                *("--arrivals-per-minute", str(ARRIVALS_PER_MINUTE)),
                *("--campaign-minutes", str(CAMPAIGN_MINUTES)),
                # Backups and exports finish before the first poll (0.2 s): the clock stands
                # still while a run polls them, and a year of catch-up runs would wait for
                # them for minutes.
                *("--task-phase-seconds", "0.05"),
                *("--webhook-url", f"{receivers['webhooks']['url']}/webhooks/datahub"),
                *("--agent-url", f"{receivers['agent']['url']}/agent/reply"),
                startup_seconds=300,
                log=data / "sandbox.log",
            )
        )
        env = pipeline_env(base, data, SERVICES, UNPACED)
        del env["DAGSTER_HOME"]  # a throwaway instance, as cron runs the commands
        env |= own | {
            "WAREHOUSE_SQL": str(ROOT / "demo" / "sql"),
            "SYNC_START_DATE": first_day.isoformat(),
            # pipeline_env leaves out every *_URL of this process: the store's is wanted.
            **{k: v for k, v in os.environ.items() if k.startswith("AWS_")},
        }
        world = World(base, data, env, clock_file, receivers, first_day, store)
        print(f"start {start:%Y-%m-%d %H:%M} UTC, the lake from {first_day}, {args.store} lake")
        first = begin(world, args.customers)
        print_table(
            "the first day",
            [
                {"step": k, **{n: f for n, f in v.items() if n != "operations"}}
                for k, v in first.items()
                if k != "shop rows"
            ],
        )
        last_changes: list[dict] = []
        week: Copy | None = None
        previous = start
        for point in range(args.points):
            # Every point's cycles follow a catch-up run, the first point's too: the first
            # hourly runs after the first day do work of their own (members looked up anew).
            at = start + timedelta(days=1 + point * args.step_days)
            figures = world.catch_up(previous, at, args.catch_up_hours, args.changes)
            print(f"catch-up {figures}", flush=True)
            for k in range(1, args.cycles_per_point + 1):
                world.cycle(point, at + timedelta(hours=k), args.changes)
            previous = at + timedelta(hours=args.cycles_per_point)
            last_changes = change_points_of_last_cycle(world, args.changes)
            if point == 0 and args.pairs:
                week = world.snapshot()
        today = sandbox_now(base).date()
        checks = checked(world, today, last_changes)
        pairs = world.pairs(week, args.pairs, args.changes) if week else []
        load = os.getloadavg()
    return {
        "rows": world.cycles,
        "first against last": first_against_last(world.cycles, args.cycles_per_point),
        "pairs": pairs,
        "pair_runs": world.pair_runs,
        "steps": world.steps,
        "catch_ups": world.catch_ups,
        "first_day": first,
        "checks": checks,
        "correct": correct(checks, world.cycles),
        "settings": {
            "store": args.store,
            "points": args.points,
            "step_days": args.step_days,
            "cycles_per_point": args.cycles_per_point,
            "catch_up_hours": args.catch_up_hours,
            "pairs": args.pairs,
            "changes_per_cycle": args.changes,
            "customers": args.customers,
            "start": start.isoformat(),
            "lake_first_day": first_day.isoformat(),
            "sandbox": f"small, live, seed 7, history {HISTORY_DAYS} days, "
            f"{ARRIVALS_PER_MINUTE} arrivals a minute, a campaign every {CAMPAIGN_MINUTES} min",
        },
        "load_average_at_end": load,
        "benchmark_wall_seconds": round(time.monotonic() - started),
        "note": "2 cores shared with other work: compare CPU seconds rather than wall",
    }


def change_points_of_last_cycle(world: World, changes: int) -> list[dict]:
    """The last cycle's changes (the newest rows of the shop's changes file)."""
    from demo.shop import POINTS
    from pipelines.lake import Lake

    lake = Lake(world.env["LAKE_ROOT"])
    return lake.read_table(lake.path(POINTS, CHANGES)).to_pylist()[-changes:]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--catch-up"]:
        return catch_up_command(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.year", description=__doc__)
    parser.add_argument("--points", type=int, default=13, help="measured points")
    parser.add_argument("--step-days", type=int, default=30, help="simulated days between points")
    parser.add_argument("--cycles-per-point", type=int, default=2, help="measured hourly cycles")
    parser.add_argument(
        "--catch-up-hours",
        type=int,
        default=24,
        help="simulated hours a catch-up run covers (24: a sync and a push a day)",
    )
    parser.add_argument("--changes", type=int, default=3, help="shop rows changed an hour")
    parser.add_argument(
        "--pairs",
        type=int,
        default=3,
        help="rounds of the same commands on a copy of the first point's lake and on the "
        "year's, side by side, at the end (0: none)",
    )
    parser.add_argument("--customers", type=int, default=300, help="the shop's customers")
    parser.add_argument("--store", choices=("local", "s3"), default="local")
    parser.add_argument("--data", type=Path, help=f"where the run's data go (default {DATA})")
    parser.add_argument(
        "--json", type=Path, help="write the result here instead of bench/results (tests)"
    )
    args = parser.parse_args(argv)
    result = run(args)
    name = "year" if args.store == "local" else "year-s3"
    tables = {
        "first against last": result.pop("first against last"),
        # The first point's lake (a copy) and the last point's, side by side.
        "pairs": result.pop("pairs"),
    }
    rows = result.pop("rows")
    # Not `report`: it prints every detail, and the steps' and runs' lists are long. The
    # same document, its tables printed.
    for title, table in {name: rows, **tables}.items():
        print_table(title, table)
    print(f"\n  checks: {json.dumps(result['checks'], default=str)}")
    write_document(name, rows, tables, result, args.json)
    print(f"\n  data equal to the truth: {result['correct']}")
    return 0 if result["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
