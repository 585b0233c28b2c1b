"""The counts of a connection's calls (requests, 429s, retries, seconds waited for the key's
rate budget) that each materialization reports as metadata; `pipelines/transport/client.py`
and `pipelines/transport/retries.py` add to them. A connection's own counts can add to its
run's too (`parent`), so a live display shows each connection's (`pipelines/pull/progress.py`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class CallStats:
    requests: int = 0
    throttled: int = 0
    retries: int = 0
    #: Seconds the requests waited for their slot of the key's rate budget (its pacing, and
    #: its holds after a 429).
    waited: float = 0.0
    #: Answers read and decoded whole: a page of a list, or one lookup's answer (a streamed
    #: download is not one). Shown live, not reported as metadata.
    pages: int = 0
    #: The counts these add to as well: a landing's, of every connection's.
    parent: CallStats | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(
        self,
        *,
        requests: int = 0,
        throttled: int = 0,
        retries: int = 0,
        waited: float = 0.0,
        pages: int = 0,
    ) -> None:
        with self._lock:
            self.requests += requests
            self.throttled += throttled
            self.retries += retries
            self.waited += waited
            self.pages += pages
        if self.parent is not None:
            self.parent.add(
                requests=requests, throttled=throttled, retries=retries, waited=waited, pages=pages
            )

    def as_metadata(self) -> dict[str, int | float]:
        return {
            "requests": self.requests,
            "429s": self.throttled,
            "retries": self.retries,
            "budget_wait_seconds": round(self.waited, 2),
        }
