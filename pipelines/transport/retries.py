"""What is retried and how long to wait: the statuses worth asking again and the error that
carries one (`RetryableStatus`), the wait a service announces (`Retry-After`), full-jitter
exponential backoff, the policy (`RetryPolicy`), and the retry loop (`retrying`) each request
of `pipelines/transport/client.py` runs in."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import httpx
import tenacity

from pipelines.errors import Retriable
from pipelines.transport.decoding import TruncatedBody
from pipelines.transport.refusals import ServiceError
from pipelines.transport.stats import CallStats

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Never wait longer than this on one `Retry-After`, whatever the service announces.
MAX_RETRY_AFTER = 120.0
#: The shortest wait between two attempts: a `retry_after` of 0 must not become a tight loop.
MIN_WAIT = 0.2
#: Attempts at an address where nothing listens (connection refused, unknown host): enough
#: for a service that is restarting, not the whole budget of a failing one, so a wrong URL
#: fails in seconds.
CONNECT_ATTEMPTS = 3


class RetryableStatus(Retriable):
    def __init__(self, error: ServiceError, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def retry_after_seconds(response: httpx.Response) -> float | None:
    """`Retry-After` as seconds or an HTTP date, else the body's `error.retry_after`."""
    header = response.headers.get("Retry-After")
    if header:
        try:
            return float(header)
        except ValueError:
            try:
                return parsedate_to_datetime(header).timestamp() - time.time()
            except (TypeError, ValueError):
                pass
    try:
        value = response.json().get("error", {}).get("retry_after")
        return float(value) if value is not None else None
    except (ValueError, AttributeError, TypeError):
        return None


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, RetryableStatus | TruncatedBody | httpx.TransportError)


class _Wait(tenacity.wait.wait_base):
    """Full-jitter exponential backoff, never shorter than the announced `retry_after`."""

    def __init__(self, base: float, cap: float) -> None:
        self.base, self.cap = base, cap

    def __call__(self, state: tenacity.RetryCallState) -> float:
        backoff = random.uniform(0, min(self.cap, self.base * 2 ** (state.attempt_number - 1)))
        exc = state.outcome.exception() if state.outcome else None
        announced = getattr(exc, "retry_after", None)
        if announced is not None:
            backoff = max(backoff, min(max(announced, 0.0), MAX_RETRY_AFTER))
        return max(backoff, MIN_WAIT)


@dataclass
class RetryPolicy:
    attempts: int = 8
    base_seconds: float = 0.5
    cap_seconds: float = 30.0
    sleep: Callable[[float], None] = time.sleep


def retrying(policy: RetryPolicy, stats: CallStats, idempotent: bool) -> tenacity.Retrying:
    """The retry loop of one request (`Transport._retrying`, `pipelines/transport/client.py`):
    what is retried, for a write too, how long it waits and when it gives up, counting each
    retry in `stats`."""

    def retry_this(exc: BaseException) -> bool:
        if not _is_retryable(exc):
            return False
        if idempotent:
            return True
        # A write is retried only when the service cannot have acted on it: refused
        # by the rate limit, or the connection never opened.
        return (isinstance(exc, RetryableStatus) and exc.error.status == 429) or isinstance(
            exc, httpx.ConnectError | httpx.ConnectTimeout
        )

    def count_retry(state: tenacity.RetryCallState) -> None:
        stats.add(retries=1)

    def stop(state: tenacity.RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        attempts = (
            min(CONNECT_ATTEMPTS, policy.attempts)
            if isinstance(exc, httpx.ConnectError)
            else policy.attempts
        )
        return state.attempt_number >= attempts

    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(retry_this),
        wait=_Wait(policy.base_seconds, policy.cap_seconds),
        stop=stop,
        sleep=policy.sleep,
        before_sleep=count_retry,
        reraise=True,
    )
