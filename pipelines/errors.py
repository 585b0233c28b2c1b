"""The product's errors, in one tree. Each message is complete for a person: what failed,
the setting, path or service involved (never a secret), and what to do. The branch says
what a caller does with it:

- `SetupError`: a setting to fix; nothing runs until it is (the command line: exit 2);
- `Unavailable`: the environment failed (a disk, the object store, the shared store); the
  next run repairs what this one could not;
- `Busy`: another run holds what this one needs; it is waited for, then told (the push:
  exit 3);
- `Damaged`: a file no run can make again is damaged; a person decides, as the message says;
- `ServiceRefused`: a service said no, or sent what cannot be right (a job that failed, a
  file short of its rows); retrying now changes nothing, the next run asks again;
- `Retriable`: a failure the next attempt may not meet (a 429 or 5xx, a cut body, a
  deadline); retried within the run, then told as the service's;
- `DataRefused`: a row or body not taken, kept with its reason where a person can look.

The command line prints the message alone; a Dagster step fails with it as its
description (`assets/told.py`); a connection's failure is told naming the connection
(`pipelines/clients/failures.py`).
"""


class SyncError(Exception):
    """An error the product raises on purpose, its message complete."""


class SetupError(SyncError):
    """A setting that cannot work, with all there is to say in its message."""


class Unavailable(SyncError):
    """The environment failed during a run; the next run repairs it."""


class Busy(SyncError):
    """Another run holds what this one needs, past the wait."""


class Damaged(SyncError):
    """A file no run can make again is damaged; nothing that needs it runs."""


class ServiceRefused(SyncError):
    """A service's answer that retrying cannot change."""


class Retriable(SyncError):
    """A failure the next attempt may not meet."""


class DataRefused(SyncError):
    """A row or body not taken, with the reason it is kept with."""


def first_line(error: BaseException) -> str:
    """An error's first line, for a message about it; its class where it says nothing."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
