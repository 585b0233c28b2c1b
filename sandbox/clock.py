"""The sandbox's notion of "now".

Data is anchored to real dates: history covers the 365 days before the anchor. Frozen, the
clock stays at the anchor; otherwise it moves with the wall clock. Tests may push it forward
with `advance()` to make live traffic arrive without waiting.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, date, datetime, timedelta


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
