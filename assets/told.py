"""A Dagster step that fails with one of the product's errors (`pipelines/errors.py`)
fails with its message as the step's description, as the command line prints it: Dagster's
`Failure`, with no chain of causes under it. Dagster still lists where it was raised below
the message; its UI has no way to leave that out."""

import functools
from collections.abc import Callable
from typing import TypeVar

import dagster as dg

from pipelines.errors import SyncError

#: The metadata entry naming the error's class, which `assets/sync.failure_class` reads.
ERROR_CLASS = "error"

Step = TypeVar("Step", bound=Callable)


def told(step: Step) -> Step:
    """`step`, failing with `dg.Failure(description=<message>)` where it raises a
    `SyncError`. Dagster reads the wrapped function's parameters (`functools.wraps`)."""

    @functools.wraps(step)
    def run(*args, **kwargs):
        try:
            return step(*args, **kwargs)
        except SyncError as error:
            raise dg.Failure(
                description=str(error), metadata={ERROR_CLASS: type(error).__name__}
            ) from None

    return run  # type: ignore[return-value]
