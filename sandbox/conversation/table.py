"""How rows are held: numpy columns that grow in place, times as epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from sandbox.clock import iso


class Table:
    """Named columns of one length; `table[name]` is a view of the filled part.

    Appends (live messages, created members) write past the end, then move `size`, so a
    reader holding an earlier view never sees a half-written row.
    """

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        self._columns = columns
        self.size = len(next(iter(columns.values())))

    def __getitem__(self, name: str) -> np.ndarray:
        return self._columns[name][: self.size]

    def append(self, rows: dict[str, np.ndarray]) -> None:
        needed = self.size + len(next(iter(rows.values())))
        for name, column in self._columns.items():
            if needed > len(column):
                grown = np.empty(max(needed, len(column) * 3 // 2 + 64), column.dtype)
                grown[: self.size] = column[: self.size]
                self._columns[name] = column = grown
            column[self.size : needed] = rows[name]
        self.size = needed


def stamp(seconds: int) -> str:
    """One epoch-seconds time in the sandbox's timestamp form."""
    return iso(datetime.fromtimestamp(int(seconds), UTC))


def stamps(seconds: np.ndarray) -> list[str]:
    """Many at once; the same text as `stamp` (UTC, second precision, `+00:00`)."""
    return [text + "+00:00" for text in np.datetime_as_string(seconds.astype("datetime64[s]"))]
