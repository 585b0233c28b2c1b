"""Damaged lake files: found when read, moved aside with their reason, landed again.

A file that is not readable Parquet (empty, cut short, not Parquet at all, an unreadable
footer, a damaged page) stops every reader of its stream: each sync would fail on it until
someone deleted it by hand, and a query over it fails naming no file. A damaged file is
moved to `<lake>/_damaged/<service>/<stream>/...` (its path in the stream kept), with a
`.reason.txt` beside it saying why and when. Its day or snapshot is then missing from the
lake, which is the state: the same run lands it again where it is among the run's days or a
snapshot, the next sync otherwise.

How deep a file is read depends on the reader:
- footers only, of every file, before a sync chooses its range (one small read each, and
  none for a file unchanged since its footer was read: `pipelines/lake/footers.py`);
- every page, checksums verified (pipelines/lake/__init__.py writes them), of the files a run is
  about to land or merge, of every file when a query of the warehouse fails, and of every
  file in the check `files_readable`, which sets aside what it finds like any reader.

Only a file's own content is taken for damage: the file is fetched whole first, so a store
or disk that fails to give it is that failure, raised as it is, and never moves a file.

A file the lake did not write is no stream's (`stream_file`, pipelines/lake/__init__.py): no
reader takes it for a day or a connection. Most are left where they are, read by nothing,
and `python -m cli check` names them. One a view's glob would read (a `.parquet` of
another tool in a day's folder) would change the relation: each reader that sets damaged
files aside moves it to `<lake>/_foreign/`, its path kept, its reason beside it, and says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import PurePosixPath

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipelines.errors import first_line
from pipelines.lake import Lake, file_day, file_stem, stream_file, watermarks
from pipelines.lake.footers import footers
from pipelines.pull.landing import served_days, today
from pipelines.stream import Stream

FOLDER = "_damaged"
#: Where the files a view would read that the lake did not write are moved.
FOREIGN = "_foreign"
REASON_SUFFIX = ".reason.txt"
#: Why such a file was moved.
FOREIGN_REASON = "not a file the lake writes, and a view of the stream would read it"


#: What a run that set files aside says of them: nothing lands them before then.
LANDED_AGAIN = "the next sync lands them again"
#: What is said of a day older than its service serves.
NOT_AGAIN = "older than its service serves, so no sync lands it again: restore it from a backup"


def what_it_held(path: str) -> str:
    """What a stream's file holds: its day, from its `date=` folder, or a whole snapshot."""
    folder = PurePosixPath(path).parent.name
    return f"day {folder.removeprefix('date=')}" if folder.startswith("date=") else "snapshot"


@dataclass(frozen=True)
class SetAside:
    """A damaged file, where it went, and why."""

    path: str
    moved_to: str
    reason: str
    #: A snapshot, or a day its service still serves: a sync lands it again.
    lands_again: bool = True
    #: Not damaged: a file the lake did not write, which held nothing of the stream's.
    foreign: bool = False

    @property
    def what(self) -> str:
        return "file the lake did not write" if self.foreign else "damaged file"

    def __str__(self) -> str:
        if self.foreign:
            return f"{self.path}: {self.reason}; moved to {self.moved_to}"
        told = f"{self.path} ({what_it_held(self.path)}): {self.reason}; moved to {self.moved_to}"
        return told if self.lands_again else f"{told}; {NOT_AGAIN}"


def lands_again(stream: Stream, path: str) -> bool:
    """Whether a sync can land again what the file held: a snapshot, or a day the stream's
    service still serves."""
    return not stream.daily or bool(served_days(stream, [file_day(path)], today())[0])


def unreadable(lake: Lake, path: str, pages: bool = False) -> str | None:
    """Why the file cannot be read, or None where it can: its footer, or with `pages` every
    page too, each against its checksum."""
    if not pages:
        try:
            lake.footer(path)
        except pa.ArrowInvalid as problem:
            return first_line(problem)
        return None
    with lake.fs.open_input_file(path) as stored:
        content = stored.read_buffer()
    try:
        parquet = pq.ParquetFile(pa.BufferReader(content), page_checksum_verification=True)
        for _ in parquet.iter_batches():
            pass
    except (pa.ArrowException, OSError) as problem:
        return first_line(problem)
    return None


def set_aside(
    lake: Lake, path: str, reason: str, again: bool = True, foreign: bool = False
) -> SetAside:
    """Move one file out of its stream, with its reason beside it: to `_damaged/`, or a
    file the lake did not write to `_foreign/`. For a damaged one the compactions' watermarks
    are forgotten: a receiver's day then lands again (`pipelines/lake/watermarks.py`)."""
    relative = path.removeprefix(lake.root).lstrip("/")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = f"{lake.root}/{FOREIGN if foreign else FOLDER}/{relative}.{stamp}"
    lake.fs.create_dir(target.rpartition("/")[0], recursive=True)
    with lake.fs.open_output_stream(target + REASON_SUFFIX) as out:
        out.write(f"{lake.uri(path)}\n{reason}\nfound {stamp}\n".encode())
    lake.fs.move(path, target)
    if not foreign:
        watermarks.forget_all(lake)
    return SetAside(lake.uri(path), lake.uri(target), reason, again and not foreign, foreign)


def damaged_files(lake: Lake, stream: Stream) -> dict[str, str]:
    """Each file of `stream` that cannot be read, every page read, and why."""
    found = {}
    for path in lake.files(stream):
        # A merge beside this (pipelines/lake/merge.py) may have deleted a file it replaced.
        with contextlib.suppress(FileNotFoundError):
            found[path] = unreadable(lake, path, pages=True)
    return {lake.uri(path): reason for path, reason in found.items() if reason is not None}


def set_aside_damaged(
    lake: Lake, stream: Stream, days: Collection[date] | None = None, pages: bool = False
) -> list[SetAside]:
    """Every file of `stream` (of a daily stream, of `days` only where given) that cannot be
    read (its footer, or with `pages` every page), moved aside; and, from the same listing,
    every file there a view would read that the lake did not write (`Lake.sorted_out`).
    Footers are read through what the lake keeps of them (`pipelines/lake/footers.py`): a
    file the listing shows unchanged since its footer was read is not read again, so a
    sync's look over its service's whole window costs the files written since the last one."""
    listed, strays = lake.sorted_out(stream, days)
    moved = []
    for info in strays:
        # Another reader beside this one may have moved it first.
        with contextlib.suppress(FileNotFoundError):
            moved.append(set_aside(lake, info.path, FOREIGN_REASON, foreign=True))
    written = {info.path: info.mtime_ns for info in listed}
    if pages:
        reasons = {}
        for path in sorted(written):
            # A merge beside this (pipelines/lake/merge.py) may have deleted a file it replaced.
            with contextlib.suppress(FileNotFoundError):
                reasons[path] = unreadable(lake, path, pages=True)
    else:
        reasons = {}
        footers(lake, stream, listed, days, unreadable=reasons)
    found = []
    for path, reason in sorted(reasons.items()):
        # A landing beside this one may have just replaced the file whole: that one is new.
        if reason is not None and lake.modified_ns(path) == written[path]:
            found.append(set_aside(lake, path, reason, lands_again(stream, path)))
    return found + moved


def damaged_of(lake: Lake, stream: Stream) -> list[str]:
    """The files of `stream` set aside so far (their reasons beside them)."""
    folder = f"{lake.root}/{FOLDER}/{stream.service}/{stream.name}"
    listed = lake.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True, recursive=True))
    return sorted(
        lake.uri(info.path)
        for info in listed
        if info.is_file and not info.path.endswith(REASON_SUFFIX)
    )


def missing(
    lake: Lake, streams: Collection[Stream], connections: Mapping[str, Collection[str]]
) -> dict[str, list[str]]:
    """Per relation, what its set-aside files held (`what_it_held`) that has not landed
    again, and whether a sync will: the relation is short of it until then. Only a file a
    sync writes counts, one of the service's `connections` (by service): a file of another
    name set aside (a stray `extra.parquet`) took nothing a sync lands from the relation,
    and would otherwise be said missing for good once its day landed whole. One listing of
    the folder."""
    folder = f"{lake.root}/{FOLDER}"
    listed = lake.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True, recursive=True))
    by_folder = {f"{s.service}/{s.name}": s for s in streams}
    short: dict[str, set[str]] = {}
    for info in listed:
        if not info.is_file or info.path.endswith(REASON_SUFFIX):
            continue
        relative = info.path.removeprefix(folder + "/").rpartition(".")[0]  # its stamp off
        stream = by_folder.get("/".join(relative.split("/")[:2]))
        inside = relative.split("/", 2)[2:]
        if stream is None or not inside or not stream_file(stream, inside[0]):
            continue
        original = f"{lake.root}/{relative}"
        ours = file_stem(original) in connections.get(stream.service, ())
        if ours and not lake.exists(original):
            when = "the next sync lands it" if lands_again(stream, original) else NOT_AGAIN
            held = f"{what_it_held(original)} (damaged, set aside; {when})"
            short.setdefault(stream.relation, set()).add(held)
    return {relation: sorted(held) for relation, held in short.items()}
