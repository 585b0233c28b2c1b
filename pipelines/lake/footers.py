"""What a daily stream's files hold, from their footers, without reading again a footer the
lake's listing shows unchanged: a check over a year of days (`rows_equal_service_total`),
and a sync's look for damaged files over its service's window before it chooses its days
(`pipelines/pull/damaged.py`), then cost an hourly run the footers of the files written
since, not one request per day kept on an object store.

Kept in `<lake>/_footers/<service>/<stream>.parquet`: each file's path in the lake, its size
and when it was last written as the listing shows them, its rows and its `pulled_at`
(`pipelines/pull/landing.py`). A listed file whose size and time both match is taken from there
(rsync's quick check); any other's footer is read. A caller may also keep one whole-number
column's distinct values per file (the broadcasts each report snapshot holds,
`pipelines/streams/datahub/reports.py`), read once per file written. A file that left the
window looked at (of a day before it, or no longer listed) is forgotten, so what is kept is
bounded by the files of the window, not by every file the stream ever had. An object store
keeps whole seconds, so a day file written again within the second of its last write, to the
same size to the byte, would be taken as unchanged until it is written again. The file is
only a cache: written whole or not at all (`Lake.put`), it may be deleted, and one that cannot be
read or written (damaged, a full disk, the store away) is passed over, the footers read
instead. Two runs writing it at once each write a true one; the last stays."""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import date

import pyarrow as pa
import pyarrow.fs as pafs

from pipelines.errors import first_line
from pipelines.lake import Lake, file_day
from pipelines.stream import Stream

FOLDER = "_footers"
SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("written_ns", pa.int64()),
        ("rows", pa.int64()),
        ("pulled_at", pa.string()),
        ("values", pa.list_(pa.int64())),
    ]
)


@dataclass(frozen=True)
class Footer:
    """What a landed file's footer says: its rows, and when it was pulled (None if unsaid);
    and, once a caller asked for them, the distinct values of one whole-number column."""

    rows: int
    pulled_at: str | None
    values: tuple[int, ...] | None = None


#: By path in the lake: (size, written_ns) and the footer.
Kept = dict[str, tuple[tuple[int, int], Footer]]


def footers(
    lake: Lake,
    stream: Stream,
    listed: list[pafs.FileInfo],
    days: Collection[date] | None,
    unreadable: dict[str, str] | None = None,
    values_of: str | None = None,
) -> dict[str, Footer]:
    """The footer of each file `listed` (`Lake.listing` of `days`, None for the whole
    stream), by path. A footer that cannot be read raises, unless `unreadable` is given: the
    file is then left out, and why is put there by its path. With `values_of` (one stream
    keeps one such column), each footer also holds that column's distinct values, read once
    per file written."""
    place = f"{lake.root}/{FOLDER}/{stream.service}/{stream.name}.parquet"
    kept = _read(lake, place)
    found: dict[str, Footer] = {}
    current: Kept = {}
    for info in listed:
        name = info.path.removeprefix(f"{lake.root}/")
        seen = (info.size, info.mtime_ns)
        known = kept[name][1] if name in kept and kept[name][0] == seen else None
        try:
            found[info.path] = _footer(lake, info.path, known, values_of)
        except pa.ArrowInvalid as problem:
            if unreadable is None:
                raise
            unreadable[info.path] = first_line(problem)
            continue
        current[name] = (seen, found[info.path])
    # Of a whole stream, only what is listed stays. Of some days, what was kept of the later
    # days stays too (another caller's window may end later), and so does what a caller of
    # the whole stream keeps values of; a file of `days` not listed, or another of a day
    # before them, has left the window and is forgotten, so the kept file holds the files of
    # the windows looked at, not every file the stream ever had.
    first = min(days, default=None) if days is not None else None
    others = {
        name: entry
        for name, entry in kept.items()
        if first is not None
        and name not in current
        and file_day(name) not in days
        and (file_day(name) > first or entry[1].values is not None)
    }
    if others.keys() | current.keys() != kept.keys() or any(
        kept[name] != entry for name, entry in current.items()
    ):
        _write(lake, place, others | current)
    return found


def _footer(lake: Lake, path: str, known: Footer | None, values_of: str | None) -> Footer:
    """`known` if it holds what is asked, else what the file says."""
    if known is None:
        footer = lake.footer(path)
        pulled = (footer.metadata or {}).get(b"pulled_at")
        known = Footer(footer.num_rows, None if pulled is None else pulled.decode())
    if values_of is not None and known.values is None:
        column = lake.read_table(path, [values_of])[values_of].unique()
        known = replace(known, values=tuple(sorted(column.to_pylist())))
    return known


def _read(lake: Lake, place: str) -> Kept:
    try:
        rows = lake.read_table(place).to_pylist()
        return {
            r["path"]: (
                (r["size"], r["written_ns"]),
                Footer(
                    r["rows"], r["pulled_at"], None if r["values"] is None else tuple(r["values"])
                ),
            )
            for r in rows
        }
    except (OSError, pa.ArrowException, KeyError):
        return {}  # none yet, damaged, not ours, or the store away: the footers are read


def _write(lake: Lake, place: str, kept: Kept) -> None:
    rows = [
        {
            "path": name,
            "size": size,
            "written_ns": ns,
            "rows": f.rows,
            "pulled_at": f.pulled_at,
            "values": f.values,
        }
        for name, ((size, ns), f) in sorted(kept.items())
    ]
    # A full disk, the store away: the next run reads the footers again.
    with contextlib.suppress(OSError):
        lake.put(place, pa.Table.from_pylist(rows, schema=SCHEMA))
