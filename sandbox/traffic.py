"""What the services were asked: requests per method and path, with the first and last
moment each was seen (monotonic seconds). Benchmarks read it to count a sync's requests and
its use of a rate limit at the service's side, where the limit is enforced."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


@dataclass
class PathTraffic:
    count: int
    first: float
    last: float


class Traffic:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paths: dict[tuple[str, str], PathTraffic] = {}

    def record(self, method: str, path: str) -> None:
        now = time.monotonic()
        with self._lock:
            seen = self._paths.get((method, path))
            if seen is None:
                self._paths[(method, path)] = PathTraffic(1, now, now)
            else:
                seen.count += 1
                seen.last = now

    def summary(self) -> list[dict]:
        with self._lock:
            return [
                {"method": method, "path": path, "count": t.count, "first": t.first, "last": t.last}
                for (method, path), t in sorted(self._paths.items())
            ]

    def reset(self) -> None:
        with self._lock:
            self._paths.clear()
