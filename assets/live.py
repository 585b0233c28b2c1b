"""The command line's live display of its landings (docs/running.md, "On a terminal"): a table
with a row per stream and connection, redrawn four times a second on stderr, above which the
product's lines still print, and left on the screen when the sync ends.

It reads the board of `pipelines/pull/progress.py`, where every landing of the command's process
keeps its figures as it goes: the command line lands in its own process (its Dagster runs
too, `execute_in_process`). Shown only where a person watches: stdout and stderr both a terminal
(not a dumb one), and not with `--debug`, whose lines are Dagster's own as before. Elsewhere
(a pipe, a file, CI, cron) the output is the plain lines alone."""

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pipelines.pull.progress import Board, TurnProgress, watching

#: The display's columns, beside the stream and the connection.
COLUMNS = ("days", "rows", "pages", "requests", "waited", "left")


def display_wanted(debug: bool) -> bool:
    """Whether the live display is drawn: a person at a terminal, and no `--debug`."""
    from rich.console import Console

    return not debug and sys.stdout.isatty() and Console(file=sys.stderr).is_interactive


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02}m" if hours else f"{minutes}m {seconds:02}s"


def cells(turn: TurnProgress, now: float) -> tuple[str, ...]:
    """One row of the display: days done of days asked (`-` for a snapshot), rows, pages,
    requests, seconds waited for the rate budget, and time left (where the days done tell
    it) or how the turn ended."""
    days = "-" if turn.days_asked is None else f"{turn.days_done}/{turn.days_asked}"
    if turn.ended is not None:
        left = "failed" if turn.failed else f"done in {_duration(turn.ended - turn.started)}"
    else:
        seconds = turn.seconds_left(now)
        left = "" if seconds is None else f"~{_duration(seconds)}"
    stats = turn.stats
    figures = (turn.rows, stats.pages, stats.requests)
    return (days, *(f"{n:,}" for n in figures), f"{stats.waited:.1f}s", left)


def table(board: Board):
    """The board as a rich table."""
    from rich.table import Table

    grid = Table(box=None, header_style="bold", pad_edge=False)
    grid.add_column("stream")
    grid.add_column("connection")
    for name in COLUMNS:
        grid.add_column(name, justify="right")
    now = time.monotonic()
    for turn in board.turns():
        style = "red" if turn.failed else "green" if turn.ended is not None else None
        grid.add_row(turn.relation, turn.connection, *cells(turn, now), style=style)
    return grid


@contextmanager
def live_progress(show: bool) -> Iterator[None]:
    """The live display for the block's landings, where `show`; else nothing."""
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
        Live(console=Console(file=terminal), get_renderable=lambda: table(board)),
    ):
        yield
