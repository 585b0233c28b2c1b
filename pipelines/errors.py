"""The product's errors, in one tree. Each message is complete for a person: what failed,
the setting, path or service involved (never a secret), and what to do. The branch says
what a caller does with it:

- `SetupError`: a setting to fix; nothing runs until it is (the command line: exit 2);
- `Unavailable`: the environment failed (a disk, the object store, the shared store); the
  next run repairs what this one could not;
- `Busy`: another run holds what this one needs; it is waited for, then told (the push:
  exit 3);
- `Damaged`: a file no run can make again is damaged; a person decides, as the message says.

The command line prints the message alone; a Dagster step fails with it as its
description (`assets/told.py`).
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
