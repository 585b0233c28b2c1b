"""The sandbox's notion of "now".

Data is anchored to real dates: history covers the `history_days` up to the anchor's day
(sandbox/config.py). Frozen, the clock stays at the anchor; otherwise it moves with the wall
clock. Tests may push it forward with `advance()` to make live traffic arrive without waiting.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np

DAY = 86_400


class Clock:
    def __init__(self, anchor: datetime | None = None, frozen: bool = False) -> None:
        anchor = anchor or datetime.now(UTC)
        if anchor.tzinfo is None:
            raise ValueError("the clock anchor must be timezone-aware")
        self.anchor = anchor.astimezone(UTC).replace(microsecond=0)
        self.frozen = frozen
        self._started = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            moved = self._offset if self.frozen else time.monotonic() - self._started + self._offset
        return self.anchor + timedelta(seconds=moved)

    def today(self) -> date:
        return self.now().date()

    def elapsed(self) -> float:
        """Seconds of data time since the anchor (0 when frozen and never advanced)."""
        return (self.now() - self.anchor).total_seconds()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds


def iso(moment: datetime) -> str:
    """ISO 8601 with an explicit UTC offset, second precision: the sandbox's one timestamp form."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Stopwatch:
    """When an asynchronous task started, on both clocks.

    Its phases pass with whichever clock moved further: the wall clock, so a task started on a
    frozen sandbox still finishes, or the data clock, so a task started before
    `POST /_sandbox/clock/advance` has finished after it.
    """

    created_at: datetime  # data time
    started: float = field(default_factory=time.monotonic)

    def age(self, now: datetime) -> float:
        return max(time.monotonic() - self.started, (now - self.created_at).total_seconds())

    def reached(self, seconds: float, now: datetime) -> datetime | None:
        """The data moment the task became `seconds` old, None if it is younger.

        Once the data clock passed it, that is `created_at + seconds`; a task aged by the wall
        clock alone (frozen) reached it at `now`, the data clock having stood still meanwhile.
        """
        if (now - self.created_at).total_seconds() >= seconds:
            return self.created_at + timedelta(seconds=seconds)
        if time.monotonic() - self.started >= seconds:
            return now
        return None


def day_counts(seconds: np.ndarray, first: date, last: date) -> dict[str, int]:
    """Rows per UTC day from `first` to `last` (zero days included) of epoch-seconds times."""
    start = int(datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp())
    days = (last - first).days + 1
    counts = np.bincount((seconds - start) // DAY, minlength=days)[:days]
    return {(first + timedelta(days=d)).isoformat(): int(counts[d]) for d in range(days)}
