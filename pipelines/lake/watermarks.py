"""How far the compaction of an inbox into a daily stream has got, over all its days: the
inbox's uuid and the newest ids it compacted (`pipelines/inbox/compaction.py`). A look for
what is new (a sensor's tick, a compaction's stale days) then costs this one small file and
the inbox's rows since, not a listing of the days and a footer each.

Kept in `<lake>/_watermarks/<service>/<stream>.parquet`, one row, rewritten by each
compaction: its size does not grow with the runs nor the days. It is only a cache of what
the day files' own watermarks say: written whole or not at all (`Lake.put`), it may be
deleted, and one that cannot be read is passed over; either way the next compaction reads
every day's file, then writes it again. A file set aside as damaged
(`pipelines/pull/damaged.py`) removes them all, so its day is compacted again."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from pipelines.lake import Lake
from pipelines.stream import Stream

FOLDER = "_watermarks"
SCHEMA = pa.schema([("source", pa.string()), ("ids", pa.list_(pa.int64()))])


@dataclass(frozen=True)
class Watermark:
    """Every row of `source` (an inbox's uuid) with ids up to `ids` (one per kind of row,
    in the inbox's order) is in the stream's files."""

    source: str
    ids: tuple[int, ...]


def _place(lake: Lake, stream: Stream) -> str:
    return f"{lake.root}/{FOLDER}/{stream.service}/{stream.name}.parquet"


def read(lake: Lake, stream: Stream) -> Watermark | None:
    """The stream's watermark, or None: none yet, damaged, or the store away."""
    try:
        [row] = lake.read_table(_place(lake, stream)).to_pylist()
        return Watermark(row["source"], tuple(row["ids"]))
    except (OSError, pa.ArrowException, KeyError, ValueError):
        return None


def write(lake: Lake, stream: Stream, mark: Watermark) -> None:
    row = {"source": mark.source, "ids": list(mark.ids)}
    # A full disk, the store away: the next compaction reads every day's file instead.
    with contextlib.suppress(OSError):
        lake.put(_place(lake, stream), pa.Table.from_pylist([row], schema=SCHEMA))


def forget_all(lake: Lake) -> None:
    """Remove every stream's watermark: a day file left the lake, and only the day files
    say which."""
    selector = pafs.FileSelector(f"{lake.root}/{FOLDER}", allow_not_found=True, recursive=True)
    for info in lake.fs.get_file_info(selector):
        if info.is_file:
            with contextlib.suppress(FileNotFoundError):
                lake.fs.delete_file(info.path)
