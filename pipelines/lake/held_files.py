"""Files a live process holds while it writes them: a killed process's are removed by the
next run, a live one's (a run beside this one) are kept. The hold is an exclusive `flock`,
which the kernel drops the moment its holder dies, so no lease has to lapse."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


def held_while_written(path: Path) -> int:
    """A descriptor holding an exclusive `flock` on `path`, created under another name and
    locked before it gets its own: a sweep by another process never sees it unheld."""
    creating = path.with_name(path.name + ".new")
    held = os.open(creating, os.O_WRONLY | os.O_CREAT, 0o644)
    fcntl.flock(held, fcntl.LOCK_EX)
    os.rename(creating, path)
    return held


def remove_unless_held(path: str | Path) -> int:
    """Remove a file no live process holds; 1 if it was removed."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # a live process holds it
        return 0
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return 1
    finally:
        os.close(fd)


@contextlib.contextmanager
def held(path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on `path` (made if missing) for the block: processes of one
    host that hold the same path take turns."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
