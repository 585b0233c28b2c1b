"""A Dagster step that fails with one of the product's errors (`pipelines/errors.py`)
fails with its message as the step's description, as the command line prints it: Dagster's
`Failure`, with no chain of causes under it, and the error's exit code in its metadata,
which the command line exits with (`assets/sync.failure_code`). Dagster still lists where
it was raised below the message; its UI has no way to leave that out."""

import functools
from collections.abc import Callable
from typing import TypeVar

import dagster as dg

from pipelines.errors import SyncError

#: The metadata entry of the error's exit code (its branch's, `pipelines/errors.py`).
EXIT_CODE = "exit code"
#: The metadata entry naming the error's class, for a person reading the step in the UI.
ERROR_CLASS = "error"

Step = TypeVar("Step", bound=Callable)


def failure(error: SyncError) -> dg.Failure:
    """The step's failure telling `error`: its message, its exit code and its class."""
    return dg.Failure(
        description=str(error),
        metadata={EXIT_CODE: error.exit_code, ERROR_CLASS: type(error).__name__},
    )


def tells_errors(step: Step) -> Step:
    """`step`, failing with `failure(error)` where it raises a `SyncError`. Dagster reads
    the wrapped function's parameters (`functools.wraps`)."""

    @functools.wraps(step)
    def run(*args, **kwargs):
        try:
            return step(*args, **kwargs)
        except SyncError as error:
            raise failure(error) from None

    return run  # type: ignore[return-value]
