"""The board a live display reads: what the long commands are doing while they run.

The core keeps a record of each part of a run as it goes (a connection's turn of a landing,
`pipelines/pull/progress.py`; a record type of a push, `pipelines/push/progress.py`; a
connection of an activities apply, `pipelines/activities/progress.py`). Where a display
watches (`watching`: the command line on a terminal, `cli/live.py`), each record is also
put on the display's `Board`, which the display reads at each refresh. Nothing is sent
anywhere: the command line runs in its own process (its Dagster runs too, with
`execute_in_process`, whatever the job's executor), so the board is shared by reference.
Elsewhere (a run of the Dagster UI, the daemon) nothing watches, and a record is its run's
alone."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

Entry = TypeVar("Entry")


class Board:
    """The records of the runs a display watches, in the order they started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[object] = []

    def add(self, entry: object) -> None:
        with self._lock:
            self._entries.append(entry)

    def entries(self, kind: type[Entry]) -> list[Entry]:
        """The records of one kind (a display draws one kind)."""
        with self._lock:
            return [entry for entry in self._entries if isinstance(entry, kind)]


#: The board of the display watching this process, if one does.
_board: Board | None = None


@contextmanager
def watching() -> Iterator[Board]:
    """A board that every record started until the end of the block is put on."""
    global _board
    board = _board = Board()
    try:
        yield board
    finally:
        _board = None


def shown(entry: Entry) -> Entry:
    """`entry`, put on the board of the display watching, if one does."""
    if _board is not None:
        _board.add(entry)
    return entry


def duration(seconds: float) -> str:
    """A time as the displays and the plain lines say it: `4m 05s`, `1h 02m`."""
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02}m" if hours else f"{minutes}m {seconds:02}s"
