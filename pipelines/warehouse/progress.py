"""What a warehouse build is doing while it runs, per copied stream, for a live display to
read (`cli/live.py`): the closed days it copies into the file's table (a year of them on a
first build), and when that began and ended. `Warehouse._build` puts one for each copied
stream on the board of the display watching, if one does (`pipelines/progress.py`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from pipelines.progress import shown

#: Its phases: not begun, copying its closed days, done.
WAITING, COPYING, DONE = "waiting", "copying", "done"


@dataclass
class StreamCopy:
    """One copied stream's part of one build, as it goes."""

    relation: str
    phase: str = WAITING
    #: Closed days read from their files into the table (new or landed again), and dropped.
    days: int = 0
    dropped: int = 0
    started: float | None = None
    ended: float | None = None

    def copying(self, days: int, dropped: int) -> None:
        self.phase, self.days, self.dropped = COPYING, days, dropped
        self.started = time.monotonic()

    def done(self) -> None:
        self.phase, self.ended = DONE, time.monotonic()


def streams_copied(relations: list[str]) -> dict[str, StreamCopy]:
    """The progress of each copied stream, waiting, on the board of the display watching."""
    return {relation: shown(StreamCopy(relation)) for relation in relations}
