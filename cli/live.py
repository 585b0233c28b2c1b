"""The command line's live display of its long commands (docs/running.md, "On a terminal"): a
table redrawn four times a second on stderr, above which the product's lines still print, and
left on the screen when the command ends. A sync's has a row per stream and connection
(`table`); a push's a row per record type (`push_table`); an activities apply's a row per
connection (`apply_table`); a warehouse build's a row per relation whose closed days it
copies into the file (`warehouse_table`).

It reads the board of `pipelines/progress.py`, where every landing, push, apply and build of the
command's process keeps its figures as it goes: the command line runs them in its own
process (its Dagster runs too, `execute_in_process`). Shown only where a person watches:
stdout and stderr both a terminal (not a dumb one), and not with `--debug`, whose lines are
Dagster's own as before. Elsewhere (a pipe, a file, CI, cron) the output is the plain lines
alone."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pipelines.activities import progress as applying
from pipelines.progress import Board, duration, watching
from pipelines.pull.progress import TurnProgress

if TYPE_CHECKING:  # imported by the push's display alone: a sync does not load the push
    from pipelines.push.progress import RecordTypeProgress

#: The display's columns, beside the stream and the connection.
COLUMNS = ("days", "rows", "pages", "requests", "waited", "left")
#: A push's columns, beside the record type.
PUSH_COLUMNS = ("phase", "keys", "rejected", "to send", "accepted", "refused", "requests", "time")
#: An apply's columns, beside the connection (the change being made is the last).
APPLY_COLUMNS = ("phase", "applied", "requests", "time")
#: A warehouse build's columns, beside the copied relation.
WAREHOUSE_COLUMNS = ("phase", "closed days copied", "dropped", "time")


def display_wanted(debug: bool) -> bool:
    """Whether the live display is drawn: a person at a terminal, and no `--debug`."""
    from rich.console import Console

    return not debug and sys.stdout.isatty() and Console(file=sys.stderr).is_interactive


def cells(turn: TurnProgress, now: float) -> tuple[str, ...]:
    """One row of the display: days done of days asked (`-` for a snapshot), rows, pages,
    requests, seconds waited for the rate budget, and time left (where the days done tell
    it) or how the turn ended."""
    days = "-" if turn.days_asked is None else f"{turn.days_done}/{turn.days_asked}"
    if turn.ended is not None:
        left = "failed" if turn.failed else f"done in {duration(turn.ended - turn.started)}"
    else:
        seconds = turn.seconds_left(now)
        left = "" if seconds is None else f"~{duration(seconds)}"
    stats = turn.stats
    figures = (turn.rows, stats.pages, stats.requests)
    return (days, *(f"{n:,}" for n in figures), f"{stats.waited:.1f}s", left)


def push_cells(record_type: RecordTypeProgress, now: float) -> tuple[str, ...]:
    """One row of a push's display: its phase, keys planned of those handed (of the view's,
    where it is planned whole: the planned alone), rows rejected and to send so far, the
    answers, requests, and the time it has taken, then how it ended."""
    if record_type.started is None:
        return (record_type.phase, *[""] * (len(PUSH_COLUMNS) - 1))
    keys = f"{record_type.planned:,}"
    if record_type.handed is not None:
        keys += f"/{record_type.handed:,}"
    taken = duration((record_type.ended or now) - record_type.started)
    figures = (
        record_type.rejected,
        record_type.to_send,
        record_type.accepted,
        record_type.refused,
        record_type.requests,
    )
    from pipelines.push.progress import FAILED

    ended = record_type.ended is not None and record_type.phase != FAILED
    return (
        record_type.phase,
        keys,
        *(f"{n:,}" for n in figures),
        f"done in {taken}" if ended else taken,
    )


def _grid(first: list[str], columns: tuple[str, ...]):
    from rich.table import Table

    grid = Table(box=None, header_style="bold", pad_edge=False)
    for name in first:
        grid.add_column(name)
    for name in columns:
        grid.add_column(name, justify="right")
    return grid


def _style(failed: bool, ended: bool) -> str | None:
    return "red" if failed else "green" if ended else None


def table(board: Board):
    """A sync's board as a rich table."""
    grid = _grid(["stream", "connection"], COLUMNS)
    now = time.monotonic()
    for turn in board.entries(TurnProgress):
        style = _style(turn.failed, turn.ended is not None)
        grid.add_row(turn.relation, turn.connection, *cells(turn, now), style=style)
    return grid


def push_table(board: Board):
    """A push's board as a rich table."""
    from pipelines.push.progress import FAILED, RecordTypeProgress

    grid = _grid(["record type"], PUSH_COLUMNS)
    now = time.monotonic()
    for record_type in board.entries(RecordTypeProgress):
        style = _style(record_type.phase == FAILED, record_type.ended is not None)
        grid.add_row(record_type.record_type, *push_cells(record_type, now), style=style)
    return grid


def warehouse_table(board: Board):
    """A warehouse build's board as a rich table: per copied stream, its closed days read into
    the file (and dropped, a day landed again or gone), and the time it took."""
    from pipelines.warehouse.progress import DONE, StreamCopy

    grid = _grid(["relation"], WAREHOUSE_COLUMNS)
    now = time.monotonic()
    for stream in board.entries(StreamCopy):
        if stream.started is None:
            grid.add_row(stream.relation, stream.phase, "", "", "")
            continue
        taken = duration((stream.ended or now) - stream.started)
        ended = stream.phase == DONE
        figures = (f"{stream.days:,}", f"{stream.dropped:,}")
        cells = (stream.phase, *figures, f"done in {taken}" if ended else taken)
        grid.add_row(stream.relation, *cells, style=_style(False, ended))
    return grid


def apply_table(board: Board):
    """An activities apply's board as a rich table: per connection, its changes made of
    those planned, requests, time, and the change being made (or the last made)."""
    grid = _grid(["connection"], APPLY_COLUMNS)
    grid.add_column("change")
    now = time.monotonic()
    for going in board.entries(applying.ConnectionApply):
        cells = [going.phase, f"{going.applied}/{going.changes}", f"{going.stats.requests:,}"]
        if going.started is None:
            cells[1:] = ["", ""]
            cells.append("")
        else:
            taken = duration((going.ended or now) - going.started)
            cells.append(f"done in {taken}" if going.phase == applying.DONE else taken)
        style = _style(going.phase == applying.FAILED, going.ended is not None)
        grid.add_row(going.connection, *cells, going.change, style=style)
    return grid


@contextmanager
def live_progress(show: bool, drawn: Callable[[Board], object] = table) -> Iterator[None]:
    """The live display for the block's runs, where `show`, the board `drawn` as a table
    (`table`: a sync's; `push_table`); else nothing."""
    if not show:
        yield
        return
    from rich.console import Console
    from rich.live import Live

    # Drawn through a descriptor of its own: an instance that keeps its runs' output
    # (DAGSTER_HOME) points stderr's at a file while each run lasts, and would keep every frame.
    terminal = os.fdopen(os.dup(sys.stderr.fileno()), "w", encoding=sys.stderr.encoding)
    with (
        terminal,
        watching() as board,
        # What prints meanwhile (the product's lines) goes above the display.
        Live(console=Console(file=terminal), get_renderable=lambda: drawn(board)),
    ):
        yield
