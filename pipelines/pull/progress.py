"""What a landing is doing while it runs, for a live display to read: per stream and
connection, the days done of the days asked, the rows landed, and its calls (pages, requests,
seconds waited for the key's rate budget: its own `CallStats`, which add to the run's).

The landing (`pipelines/pull/landing.py`) keeps a `TurnProgress` for each connection's turn,
on the board of the display watching, if one does (`pipelines/progress.py`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pipelines.progress import shown
from pipelines.transport import CallStats


@dataclass
class TurnProgress:
    """One connection's part of one landing, as it goes."""

    relation: str = ""
    connection: str = ""
    #: The days the run asks for; None for a snapshot, which has none.
    days_asked: int | None = None
    stats: CallStats = field(default_factory=CallStats)
    days_done: int = 0
    rows: int = 0
    started: float = field(default_factory=time.monotonic)
    #: When the turn ended (`time.monotonic`), None while it runs.
    ended: float | None = None
    failed: bool = False

    def day_landed(self, rows: int | None) -> None:
        """A day of the run is done: its rows written, or its file kept (None)."""
        self.days_done += 1
        self.rows += rows or 0

    def end(self, rows: int | None = None, failed: bool = False) -> None:
        """The turn is over: every row it landed (`rows`), or it failed."""
        if rows is not None:
            self.rows = rows
        self.failed = failed
        self.ended = time.monotonic()

    def seconds_left(self, now: float) -> float | None:
        """What is left, at the pace of the days done so far; None where that cannot be
        told (a snapshot, no day done yet, the turn over)."""
        if self.ended is not None or not self.days_asked or not self.days_done:
            return None
        pace = (now - self.started) / self.days_done
        return pace * max(self.days_asked - self.days_done, 0)


def turn_started(
    relation: str, connection: str, days_asked: int | None, run_stats: CallStats
) -> TurnProgress:
    """The progress of a connection's turn, its calls counted in `run_stats` too; on the
    board of the display watching, if one does."""
    return shown(TurnProgress(relation, connection, days_asked, CallStats(parent=run_stats)))
