"""Damaged lake files: found when read, moved aside with their reason, landed again.

A file that is not readable Parquet (empty, cut short, not Parquet at all, an unreadable
footer) stops every reader of its stream: each sync would fail on it until someone deleted
it by hand. So before a run lands a stream (a daily one's run: its own days; a sync: every
day, before it chooses its range), and when the warehouse's views fail to build, the files'
footers are read; a file whose footer cannot be is moved to
`<lake>/_damaged/<service>/<stream>/...` (its path in the stream kept), with a `.reason.txt`
beside it saying why and when. Its day or snapshot is then missing from the lake, which is
the state: the same run lands it again where it is among the run's days or a snapshot, the
next sync otherwise.

Only a file's own content is taken for damage (pyarrow's `ArrowInvalid`); a store that does
not answer is the store's failure, raised as it is.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime

import pyarrow as pa
import pyarrow.fs as pafs

from pipelines.lake import Lake, Stream, file_day

FOLDER = "_damaged"
REASON_SUFFIX = ".reason.txt"


@dataclass(frozen=True)
class SetAside:
    """A damaged file, where it went, and why."""

    path: str
    moved_to: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}; moved to {self.moved_to}"


def unreadable(lake: Lake, path: str) -> str | None:
    """Why the file's footer cannot be read, or None where it can."""
    try:
        lake.footer(path)
    except pa.ArrowInvalid as problem:
        return str(problem).strip().splitlines()[0] if str(problem).strip() else "unreadable"
    return None


def set_aside(lake: Lake, path: str, reason: str) -> SetAside:
    """Move one file out of its stream, with its reason beside it."""
    relative = path.removeprefix(lake.root).lstrip("/")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = f"{lake.root}/{FOLDER}/{relative}.{stamp}"
    lake.fs.create_dir(target.rpartition("/")[0], recursive=True)
    with lake.fs.open_output_stream(target + REASON_SUFFIX) as out:
        out.write(f"{lake.uri(path)}\n{reason}\nfound {stamp}\n".encode())
    lake.fs.move(path, target)
    return SetAside(lake.uri(path), lake.uri(target), reason)


def set_aside_damaged(
    lake: Lake, stream: Stream, days: Collection[date] | None = None
) -> list[SetAside]:
    """Every file of `stream` (of a daily stream, of `days` only where given) whose footer
    cannot be read, moved aside."""
    found = []
    for path in lake.files(stream):
        if days is not None and file_day(path) not in days:
            continue
        reason = unreadable(lake, path)
        if reason is not None:
            found.append(set_aside(lake, path, reason))
    return found


def damaged_of(lake: Lake, stream: Stream) -> list[str]:
    """The files of `stream` set aside so far (their reasons beside them)."""
    folder = f"{lake.root}/{FOLDER}/{stream.service}/{stream.name}"
    listed = lake.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True, recursive=True))
    return sorted(
        lake.uri(info.path)
        for info in listed
        if info.is_file and not info.path.endswith(REASON_SUFFIX)
    )
