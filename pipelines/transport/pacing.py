"""Request pacing: a key's rates (`Rate`) and the pacer that spaces its requests under them,
in this process (`Pacer`) or on the budget the key shares with other processes and hosts
(`SharedPacer`, on a store of `pipelines/state/budget.py`), with the registry that gives every
client of a key and bucket the same pacer (`pacer_for`). `pipelines/transport/client.py`
waits on it before each request and holds it after a 429."""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass

from pipelines.state.budget import BudgetStore


@dataclass(frozen=True)
class Rate:
    """`requests` per `per_seconds` for one key and bucket of operations."""

    requests: int
    per_seconds: float = 60.0


class Pacer:
    """Spaces requests evenly so a sliding window of `rate` is never exceeded.

    Even spacing (not a burst then a wait) keeps the service's own window, measured at
    its side with network jitter, under the limit while still using ~all of it. Shared
    by every thread that uses the same key and bucket (see `pacer_for`).
    """

    def __init__(self, rate: Rate, headroom: float = 0.02) -> None:
        self.interval = rate.per_seconds / rate.requests * (1 + headroom)
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> float:
        """Wait for this request's slot; the seconds waited."""
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)
        return start - now

    def hold(self, seconds: float) -> None:
        """After a 429: nobody on this key sends again before `seconds` have passed."""
        with self._lock:
            self._next = max(self._next, time.monotonic() + seconds)


class SharedPacer:
    """A `Pacer` whose next free slot and holds live in a store every process using the key
    shares (`pipelines/state/budget.py`): the same even spacing and the same waits after a 429,
    across processes and hosts. The store knows the key by `key_id` only."""

    def __init__(
        self, store: BudgetStore, key: str, bucket: str, rate: Rate, headroom: float = 0.02
    ) -> None:
        self.interval = rate.per_seconds / rate.requests * (1 + headroom)
        self._store, self._key, self._bucket = store, key, bucket

    def wait(self) -> float:
        """Wait for this request's slot; the seconds waited. A request that wakes after the
        next slot has come (a busy machine is late to wake a sleeper) takes a new one:
        sent then, it would go beside that slot's request, and a few such would crowd the
        service's window over its limit."""
        waited = 0.0
        while True:
            delay = self._store.reserve(self._key, self._bucket, self.interval)
            if delay <= 0:
                return waited
            slot = time.monotonic() + delay
            time.sleep(delay)
            waited += delay
            if time.monotonic() - slot < self.interval:
                return waited

    def hold(self, seconds: float) -> None:
        self._store.hold(self._key, self._bucket, seconds)


_pacers: dict[tuple[str, str], Pacer] = {}
_pacers_lock = threading.Lock()


def key_id(api_key: str, base_url: str = "") -> str:
    """A short, non-reversible name for a key at a service (`base_url`): safe in pool names
    and metadata. A budget belongs to the key where it is used: the same key at another
    address (a region, another sandbox) has a budget of its own."""
    named = f"{base_url}\n{api_key}" if base_url else api_key
    return hashlib.sha256(named.encode()).hexdigest()[:12]


def pacer_for(
    api_key: str, bucket: str, rate: Rate, budget: BudgetStore | None = None, base_url: str = ""
) -> Pacer | SharedPacer:
    """The key's pacer for `bucket` at `base_url`: on the shared `budget` when there is one,
    else one pacer per key and bucket in this process, whichever client asks."""
    name = key_id(api_key, base_url)
    if budget is not None:
        return SharedPacer(budget, name, bucket, rate)
    with _pacers_lock:
        return _pacers.setdefault((name, bucket), Pacer(rate))
