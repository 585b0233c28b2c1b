"""Per-key rate limits: a sliding window of request times per bucket.

Uses the wall clock (monotonic), never the data clock, so a frozen sandbox still enforces
its limits.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque


class RateLimiter:
    def __init__(self, window_seconds: float = 60.0, enabled: bool = True) -> None:
        self.window = window_seconds
        self.enabled = enabled
        self._hits: dict[tuple, deque[float]] = {}
        self._lock = threading.Lock()
        self.refused = 0

    def hit(self, bucket: tuple, limit: int) -> int | None:
        """Count one request; return None if allowed, else whole seconds until one is free."""
        if not self.enabled:
            return None
        now = time.monotonic()
        with self._lock:
            hits = self._hits.setdefault(bucket, deque())
            while hits and hits[0] <= now - self.window:
                hits.popleft()
            if len(hits) >= limit:
                self.refused += 1
                return max(1, math.ceil(hits[0] + self.window - now))
            hits.append(now)
            return None
