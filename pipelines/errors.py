"""The product's errors, in one tree. Each message is complete for a person: what failed,
the setting, path or service involved (never a secret), and what to do. The branch says
what a caller does with it, and declares the command line's exit code (`exit_code`,
docs/running.md), which a Dagster step's failure carries too (`assets/failures.py`):

- `SetupError` (exit 2): a setting to fix; nothing runs until it is;
- `Unavailable` (exit 1): the environment failed (a disk, the object store, the shared
  store), before or during a run; the next run repairs what this one could not;
- `Busy` (exit 3): another run holds what this one needs; it is waited for, then told;
- `Damaged` (exit 4): a file no run can make again is damaged; a person decides, as the
  message says;
- `ServiceRefused` (exit 1): a service said no, or sent what cannot be right (a job that
  failed, a file short of its rows); retrying now changes nothing, the next run asks again;
- `Retriable` (exit 1): a failure the next attempt may not meet (a 429 or 5xx, a cut body, a
  deadline); retried within the run, then told as the service's;
- `DataRefused` (exit 1): a row or body not taken, kept with its reason where a person can
  look.

The command line prints the message alone; a Dagster step fails with it as its
description (`assets/failures.py`); a connection's failure is told naming the connection
(`pipelines/clients/failures.py`). `tests/test_errors.py` fails for an error of the product
outside this tree, or a branch without its exit code.
"""


class SyncError(Exception):
    """An error the product raises on purpose, its message complete. Raised only as one of
    the branches below, each of which sets `exit_code`."""

    exit_code: int


class SetupError(SyncError):
    """A setting that cannot work, with all there is to say in its message."""

    exit_code = 2


class Unavailable(SyncError):
    """The environment failed (before a run or during it); the next run repairs it."""

    exit_code = 1


class Busy(SyncError):
    """Another run holds what this one needs, past the wait."""

    exit_code = 3


class Damaged(SyncError):
    """A file no run can make again is damaged; nothing that needs it runs."""

    exit_code = 4


class ServiceRefused(SyncError):
    """A service's answer that retrying cannot change."""

    exit_code = 1


class Retriable(SyncError):
    """A failure the next attempt may not meet."""

    exit_code = 1


class DataRefused(SyncError):
    """A row or body not taken, with the reason it is kept with."""

    exit_code = 1


def first_line(error: BaseException) -> str:
    """An error's first line, for a message about it; its class where it says nothing."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
