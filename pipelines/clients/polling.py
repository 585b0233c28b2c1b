"""Asynchronous jobs (message backups, member exports and imports): poll with backoff to a
deadline. Starting and downloading are the clients' (`Transport.download_with_retry`)."""

import time
from collections.abc import Callable
from typing import TypeVar

from pipelines.errors import Retriable, ServiceRefused

State = TypeVar("State")

#: Between two looks: 0.2 s, doubling, at most 5 s.
FIRST_POLL_SECONDS = 0.2
MAX_POLL_SECONDS = 5.0


class JobFailed(ServiceRefused):
    """The service says the job failed."""


class JobDeadlineExceeded(Retriable, TimeoutError):
    """The job did not finish before its deadline."""


def wait_for_job(
    look: Callable[[], State],
    *,
    finished: Callable[[State], bool],
    failed: Callable[[State], bool] = lambda state: False,
    deadline_seconds: float,
    describe: Callable[[State], str],
    sleep: Callable[[float], None] = time.sleep,
) -> State:
    """Look until `finished`; raise when `failed` or when the deadline (counted from now)
    passes, with `describe(state)` saying which job and where it stood."""
    deadline = time.monotonic() + deadline_seconds
    wait = FIRST_POLL_SECONDS
    while True:
        state = look()
        if finished(state):
            return state
        if failed(state):
            raise JobFailed(f"{describe(state)}: failed on the service")
        left = deadline - time.monotonic()
        if left <= 0:
            raise JobDeadlineExceeded(
                f"{describe(state)}: not finished when its deadline of {deadline_seconds:g} s "
                "passed"
            )
        sleep(min(wait, left))
        wait = min(wait * 2, MAX_POLL_SECONDS)
