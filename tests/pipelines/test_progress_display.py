"""`python -m cli sync` on a terminal draws a live table per stream and connection
(`cli/live.py`: days done of days asked, rows, pages, requests, seconds waited, time left);
in a pipe it prints the plain lines alone, as cron, CI and Dagster get them."""

import asyncio
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from cli.live import cells
from pipelines.lake import Lake, file_day
from pipelines.pull.progress import TurnProgress
from pipelines.settings import load_settings
from pipelines.streams.comment import TRIGGER_LOGS
from pipelines.warehouse.closed_days import first_open_day
from tests.pipelines.conftest import LiveSandbox
from tests.pipelines.test_comment import workspace_id

#: A control sequence of a terminal (colour, cursor movement).
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def sync_command() -> tuple[list[str], int]:
    """A sync of the trigger logs' last two days, and the days it asks for."""
    today = datetime.now(UTC).date()
    days = ["--start", str(today - timedelta(days=1)), "--end", str(today)]
    return [sys.executable, "-m", "cli", "sync", "--streams", "trigger_logs", *days], 2


def environment() -> dict[str, str]:
    """The test's settings, as a terminal a person sits at: wide enough for the table, and
    none of rich's switches that force or refuse colour and animation."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORCE_COLOR", "TTY_"))}
    env.pop("NO_COLOR", None)
    return env | {"TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"}


def on_a_terminal(
    command: list[str], watch: Callable[[str], None] = lambda _: None
) -> tuple[int, str]:
    """Run `command` with stdin, stdout and stderr a pseudo-terminal; its exit code and all
    it wrote there. `watch` is given what it wrote so far, as it comes."""
    main, side = os.openpty()
    process = subprocess.Popen(
        command, stdin=side, stdout=side, stderr=side, env=environment(), close_fds=True
    )
    os.close(side)
    written, deadline = bytearray(), time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1)
            if not ready:
                continue
            try:
                chunk = os.read(main, 65536)
            except OSError:  # every writer closed the terminal: the command has ended
                break
            if not chunk:
                break
            written += chunk
            watch(written.decode(errors="replace"))
    finally:
        os.close(main)
    return process.wait(timeout=60), written.decode(errors="replace")


@contextmanager
def held(sandbox: LiveSandbox, path: str, after: int = 0) -> Iterator[threading.Event]:
    """The sandbox answers no POST to `path` past the first `after` until the event is set:
    a command is seen at work on them, whatever the machine's pace (300 s at most, should
    the test fail first)."""
    injector = sandbox.app.faults
    inner = injector.app
    release = threading.Event()
    passed = [0]

    async def holding(scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == path:
            passed[0] += 1
            deadline = time.monotonic() + 300
            while passed[0] > after and not release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        await inner(scope, receive, send)

    injector.app = holding
    try:
        yield release
    finally:
        release.set()
        injector.app = inner


def test_a_sync_on_a_terminal_shows_each_streams_days_and_rows_live(frozen_sandbox, sync_env):
    sync_env(frozen_sandbox)
    command, asked = sync_command()
    truth = frozen_sandbox.truth_days("comment", workspace_id(frozen_sandbox), "trigger_logs")
    today = datetime.now(UTC).date()
    rows = sum(truth.get(str(today - timedelta(days=n)), 0) for n in range(asked))

    code, screen = on_a_terminal(command)

    assert code == 0, screen
    assert CONTROL.search(screen), screen  # drawn, not printed line by line
    plain = CONTROL.sub("", screen)
    header = r"stream\s+connection\s+days\s+rows\s+pages\s+requests\s+waited\s+left"
    assert re.search(header, plain), plain
    # The table's last frame: the stream's connection, every day done, the truth's rows,
    # pages, requests, seconds waited, and that it is done.
    row = rf"comment\.trigger_logs\s+default\s+{asked}/{asked}\s+([\d,]+)\s+[\d,]+\s+[\d,]+"
    frames = re.findall(row + r"\s+\d+\.\ds\s+done in", plain)
    assert frames, plain
    assert int(frames[-1].replace(",", "")) == rows
    # The product's lines still print, and the rows of what it synced after the table.
    assert f"comment.trigger_logs [default]: {rows} rows over {asked} day(s)" in plain
    counts = re.search(r"^relation\s+rows", plain, re.MULTILINE)
    assert counts and plain.rindex("done in") < counts.start(), plain


def test_a_sync_in_a_pipe_prints_the_plain_lines_alone(frozen_sandbox, sync_env):
    sync_env(frozen_sandbox)
    command, asked = sync_command()

    done = subprocess.run(command, capture_output=True, text=True, env=environment(), timeout=300)

    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert "requests" not in done.stderr and "done in" not in done.stderr  # no table
    (line,) = [line for line in done.stderr.splitlines() if "rows over" in line]
    assert re.fullmatch(rf"comment\.trigger_logs \[default\]: \d+ rows over {asked} day\(s\)", line)
    assert "comment.trigger_logs" in done.stdout  # its row count, as before


def test_the_time_left_is_told_from_the_days_done_once_one_is():
    turn = TurnProgress("comment.trigger_logs", "default", days_asked=4, started=100.0)
    assert cells(turn, now=110.0) == ("0/4", "0", "0", "0", "0.0s", "")
    turn.day_landed(1200)
    turn.stats.add(requests=7, pages=6, waited=2.5)
    # A day in 10 s: three days left, about 30 s.
    assert cells(turn, now=110.0) == ("1/4", "1,200", "6", "7", "2.5s", "~0m 30s")
    turn.end(failed=True)
    assert cells(turn, now=120.0)[-1] == "failed"
    snapshot = TurnProgress("comment.workspace", "default", started=100.0)
    assert cells(snapshot, now=110.0)[0] == "-" and cells(snapshot, now=110.0)[-1] == ""


def test_a_warehouse_build_on_a_terminal_shows_each_relations_closed_days_copied(
    frozen_sandbox, sync_env
):
    """`warehouse` builds the file anew (it is gone): on a terminal, a row per copied
    relation; the trigger logs' ends with the closed days the lake holds (before yesterday,
    which the views read from the lake), all copied; in a pipe, no table."""
    sync_env(frozen_sandbox)
    today = datetime.now(UTC).date()
    days = ["--start", str(today - timedelta(days=4)), "--end", str(today)]
    sync = [sys.executable, "-m", "cli", "sync", "--streams", "trigger_logs", *days]
    assert subprocess.run(sync, capture_output=True, env=environment(), timeout=300).returncode == 0
    settings = load_settings()
    held = {file_day(p) for p in Lake(settings.lake_root).files(TRIGGER_LOGS)}
    closed = len({day for day in held if day < first_open_day(today)})
    assert closed >= 3  # a build with days to copy
    warehouse = [sys.executable, "-m", "cli", "warehouse"]

    settings.warehouse_path.unlink()
    code, screen = on_a_terminal(warehouse)

    assert code == 0, screen
    assert CONTROL.search(screen), screen
    plain = CONTROL.sub("", screen)
    assert re.search(r"relation\s+phase\s+closed days copied\s+dropped\s+time", plain), plain
    frames = re.findall(r"comment\.trigger_logs\s+done\s+(\d+)\s+0\s+done in", plain)
    assert frames and int(frames[-1]) == closed, plain

    settings.warehouse_path.unlink()
    done = subprocess.run(warehouse, capture_output=True, text=True, env=environment(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "done in" not in done.stderr
    assert done.stdout.startswith("warehouse: ")
