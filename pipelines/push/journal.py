"""The push's write-ahead journal: every answer of the data hub written the moment it arrives,
before the worker that got it sends anything else.

A record the hub accepted, an import task it started or finished: each is one line of JSON
appended to this process's journal file with one `write` call before the worker's next
request goes. Once `write` returns, the line is the kernel's: it survives the process being
killed at any moment, so a killed push has lost no acknowledgement, and what it may send
again is only what was in flight when it died. A power loss or an OS crash may still lose
the last lines (they are not fsynced: a sync per answer cost the push much CPU, bench: push);
the records they acknowledged are then sent again, which latest-timestamp-wins makes
harmless. What must never be sent twice (an at-most-once row's `sending` mark) is written
with `fsync=True`, on the disk before its request goes.

Each process writes a file of its own, `journal-<uuid>.jsonl` in the journal folder, and holds
an exclusive `flock` on it while it is open. `compact` moves every file no live process holds
into the lake's `sync/pushed`, as one Parquet file named like it, then deletes it: a
compaction stopped between the two writes the same Parquet file again next time, never a
second one. `Ledger` compacts before it reads, so the lake stays the state; the push merges
the ledger's files at its end (`pipelines/push/ledger_merge.py`).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pa_json

from pipelines.lake import Lake
from pipelines.push.lease import Lease
from pipelines.state.local_data import data_dir
from pipelines.state.shared_store import StoreUnavailable, unavailable
from pipelines.stream import Stream

FILE_PREFIX = "journal-"
SUFFIX = ".jsonl"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
#: A file not named yet is a killed push's once it is this old.
LEFT_BEHIND_SECONDS = 3600
#: How much of a file's end is read at a time to find its last newline.
TAIL_BYTES = 1 << 16
#: How much of a journal file is read and written as one row group of the ledger.
BLOCK_BYTES = 1 << 20


def journal_path(lake_root: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Path:
    """`PUSH_JOURNAL`, else the folder `push/journal` in the lake's data directory
    (`pipelines/state/local_data.py`)."""
    env = os.environ if env is None else env
    if env.get("PUSH_JOURNAL"):
        return Path(env["PUSH_JOURNAL"])
    return data_dir(lake_root, env) / "push" / "journal"


VARIABLE = "PUSH_JOURNAL"
#: What becomes of the push, wherever its journal is.
STOPPED = (
    "The push stopped sending at once: the next one sends again at most the requests that "
    "were in flight."
)
ADVICE = (
    "Free space there, or point PUSH_JOURNAL at a folder this process can write (or "
    f"SYNC_STORE at the deployment's Postgres). {STOPPED}"
)


def journal_failure(location: str, exc: BaseException) -> StoreUnavailable:
    return unavailable("the push journal", location, VARIABLE, exc, ADVICE)


class Journal:
    """The push's workers append to one file, each answer in one `write`, from any thread;
    `close` and `compact` only while none is recording. A write that fails is a
    `StoreUnavailable` naming the folder and `PUSH_JOURNAL`."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._fd: int | None = None

    def record(
        self, entries: Iterable[Mapping], fsync: bool = False, lease: Lease | None = None
    ) -> int:
        """Append entries (ledger rows); returns how many once the kernel holds them, and
        with `fsync` once they are on the disk. `lease` asks nothing here: this host's file
        lease cannot lapse while its holder lives (`Lease.fence`); a lease in Postgres beside
        a journal folder (`PUSH_JOURNAL` with `SYNC_STORE`) fences nothing (docs/push.md)."""
        lines = journal_lines(entries)
        if not lines:
            return 0
        data = ("\n".join(lines) + "\n").encode()
        try:
            fd = self._fd
            if fd is None:
                with self._lock:
                    fd = self._fd if self._fd is not None else self._open()
            # No lock around the write: the kernel appends each `write` to an O_APPEND file
            # whole, and a lock held across the syscall made the workers queue behind it.
            written = os.write(fd, data)
            if written != len(data):  # a full disk: what was written is cut short
                raise OSError(f"only {written} of {len(data)} bytes written")
            if fsync:
                os.fsync(fd)
        except OSError as exc:
            raise journal_failure(str(self.folder), exc) from None
        return len(lines)

    def _open(self) -> int:
        """A new file of this process, locked before it gets the name `compact` looks for."""
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{FILE_PREFIX}{uuid.uuid4().hex}{SUFFIX}"
        aside = self.folder / f".{name}.tmp"
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(aside, self.folder / name)
        self._fd = fd
        return fd

    def close(self) -> None:
        """Close this process's file (its lines stay for the next compaction)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)  # releases the lock
                self._fd = None

    def moving(self, names: Collection[str]) -> set[str]:
        """None of the ledger files named: a compaction stopped before deleting its journal
        file writes the same file again with the same rows (the file's writer is gone), and
        a merge reads each row once (`pipelines/lake/merge.py`)."""
        return set()

    def compact(self, lake: Lake, stream: Stream) -> int:
        """Move every journal file no live process holds (this one's included: it is closed
        first, and the next answer opens a new one) into `stream`; returns the rows moved.
        A file a killed process left before naming it holds nothing and is removed."""
        self.close()
        moved = 0
        for path in sorted(self.folder.glob(f"{FILE_PREFIX}*{SUFFIX}")):
            with _unless_held(path) as fd:
                if fd is None:
                    continue
                if _whole_lines(fd):
                    with lake.writer(stream, path.name.removesuffix(SUFFIX)) as out:
                        for table in journal_tables(pa.OSFile(str(path)), stream):
                            out.write_table(table)  # a row group per block: memory stays flat
                    moved += out.rows
                path.unlink(missing_ok=True)
        for path in self.folder.glob(f".{FILE_PREFIX}*.tmp"):
            # A push names its file microseconds after creating it, and locks it only in
            # between: one left an hour is a killed push's, never one about to be named.
            if _age_seconds(path) > LEFT_BEHIND_SECONDS:
                with _unless_held(path) as fd:
                    if fd is not None:
                        path.unlink(missing_ok=True)
        return moved


def journal_lines(entries: Iterable[Mapping]) -> list[str]:
    """Ledger rows as journal lines: JSON, times as UTC microseconds, stamped `pushed_at`."""
    pushed_at = _micros(datetime.now(UTC))
    return [
        json.dumps({k: _micros(v) for k, v in entry.items()} | {"pushed_at": pushed_at})
        for entry in entries
    ]


def _age_seconds(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


@contextmanager
def _unless_held(path: Path) -> Iterator[int | None]:
    """The file open and locked, or None if a live process holds it (or it is gone)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:  # another compaction took it
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a live push is writing it
            yield None
            return
        yield fd
    finally:
        os.close(fd)


def _micros(value: object) -> object:
    """A datetime as UTC microseconds since the epoch (the lake's unit); else as it is."""
    if isinstance(value, datetime):
        return (value - EPOCH) // MICROSECOND
    return value


def _whole_lines(fd: int) -> int:
    """Cut a last line without its newline: its `write` was cut short (a full disk) and
    raised, so no worker took it as written. The size left, in bytes."""
    size = end = os.fstat(fd).st_size
    while end > 0:
        start = max(0, end - TAIL_BYTES)
        tail = os.pread(fd, end - start, start)
        if (newline := tail.rfind(b"\n")) >= 0:
            end = start + newline + 1
            break
        end = start
    if end < size:
        os.ftruncate(fd, end)
    return end


def journal_tables(source: pa.NativeFile, stream: Stream) -> Iterator[pa.Table]:
    """Journal lines (a file, or a buffer of them) as tables of `stream`, a block at a
    time."""
    # Times were written as microseconds: read as integers, then cast.
    as_read = pa.schema(
        field.with_type(pa.int64()) if pa.types.is_timestamp(field.type) else field
        for field in stream.schema
    )
    options = pa_json.ParseOptions(explicit_schema=as_read, unexpected_field_behavior="error")
    # One thread: the push's own workers are done, and Arrow's pool would hold more memory.
    blocks = pa_json.ReadOptions(use_threads=False, block_size=BLOCK_BYTES)
    with source:
        for batch in pa_json.open_json(source, read_options=blocks, parse_options=options):
            yield pa.Table.from_batches([batch]).select(stream.schema.names).cast(stream.schema)
