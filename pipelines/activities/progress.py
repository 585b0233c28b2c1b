"""What an apply is doing while it runs, per connection, for a live display to read
(`cli/live.py`) and for the line the apply logs as each change is made: the changes made
of those planned, the one being made, and the requests sent (its client's `CallStats`).

`apply_activities` (`plan.py`) makes one for each connection with changes, once every
connection is planned, on the board of the display watching, if one does
(`pipelines/progress.py`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pipelines.progress import shown
from pipelines.transport import CallStats

#: Its phases: planned and not begun, making its changes, and how it ended.
WAITING, APPLYING, DONE, FAILED = "waiting", "applying", "done", "failed"


@dataclass
class ConnectionApply:
    """One connection's part of one apply, as it goes."""

    connection: str
    changes: int
    stats: CallStats = field(default_factory=CallStats)
    phase: str = WAITING
    applied: int = 0
    #: The change being made, or the last one made: its action and activity.
    change: str = ""
    started: float | None = None
    ended: float | None = None

    def begin(self) -> None:
        self.phase, self.started = APPLYING, time.monotonic()

    def making(self, action: str, name: str) -> None:
        self.change = f"{action} {name!r}"

    def made(self) -> str:
        """Count the change made; the line that says so."""
        self.applied += 1
        return (
            f"applied {self.applied}/{self.changes} in connection {self.connection}: {self.change}"
        )

    def end(self, failed: bool = False) -> None:
        self.phase, self.ended = (FAILED if failed else DONE), time.monotonic()


def connections_planned(changes: dict[str, int]) -> dict[str, ConnectionApply]:
    """The progress of each connection with changes (`changes`: their count, by connection),
    waiting, on the board of the display watching, if one does."""
    return {name: shown(ConnectionApply(name, count)) for name, count in changes.items()}
