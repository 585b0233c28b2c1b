"""Bookkeeping per day, not per run: the files a stream gains at every run (the run history,
`pipelines/lake/run_history.py`; the push ledger, `pipelines/push/ledger_merge.py`) merged
into few, so that no reader lists a folder that grows with the number of runs.

A merge works in one folder (a day of a daily stream, or the stream's folder). Its inputs are
the files there that no merged file replaces and that are smaller than `FILE_BYTES` (a file
that large is left as it is, so a merge rewrites a bounded amount). Two or more are written
as one file, `merged-<hash of their names>.parquet`, which says what it replaces twice: in its
key-value metadata (`replaces`: the inputs' names), and row by row (the column `_origin`: the
name of the file each row was first written to, kept through later merges). The inputs are
deleted by a later merge, once that file has been in place `GRACE_SECONDS`.

The guarantees are a landing's, with no rename of several files at once (an object store has
none):

- A merge killed at any point loses nothing: its file appears whole or not at all
  (`Lake.writer`), and the files it replaces stay until it is whole.
- A reader sees each row once: a merged stream's relations (`parquet_read`,
  `pipelines/lake/__init__.py`) read each original file's rows from one file only. They list
  the folder once, so they see one state of it; a file is deleted only `GRACE_SECONDS` after
  the file replacing it appeared, so one a reader listed just before is still there to read.
- Two merges at once (two hosts) double nothing: the same inputs give the same name and the
  same rows; different ones give two files whose rows overlap, read once as above, and
  merged into one by the next merge (which takes each original's rows once too).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import PurePosixPath

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from pipelines.lake import ORIGIN, Lake, file_schema
from pipelines.stream import Stream

MERGED_PREFIX = "merged-"
#: The key-value metadata of a merged file that lists the names of the files it replaces.
REPLACES = "replaces"
#: A file this large is not merged again: a merge rewrites at most about this much.
FILE_BYTES = 32 << 20
#: How long the files a merge replaced stay beside its file: longer than a reader takes
#: between listing a folder and opening what it listed.
GRACE_SECONDS = 15 * 60


@dataclass(frozen=True)
class Folder:
    """One folder's files as a merge sees them from one listing: each file's name, size and
    time, and what each merged file there replaces (from its footer)."""

    files: dict[str, pafs.FileInfo]
    replaces: dict[str, list[str]]

    def replaced_by(self, merged: str) -> list[str]:
        """The files here that `merged` replaces; not one written again since (its rows are
        newer than their copy), which is merged anew."""
        written = self.files[merged].mtime_ns
        return [
            name
            for name in self.replaces[merged]
            if name in self.files and self.files[name].mtime_ns <= written
        ]

    @property
    def replaced(self) -> set[str]:
        return {name for merged in self.replaces for name in self.replaced_by(merged)}

    def inputs(self, moving: Collection[str] = ()) -> list[str]:
        """The files to merge: none replaced yet, none as large as `FILE_BYTES`, none a
        writer may still write again with other rows (`moving`)."""
        replaced = self.replaced
        return sorted(
            name
            for name, info in self.files.items()
            if name not in replaced and name not in moving and info.size < FILE_BYTES
        )

    def leftovers(self, now: float, grace: float) -> list[str]:
        """The replaced files whose merged file has been in place `grace` seconds."""
        settled = {
            merged for merged in self.replaces if now - self.files[merged].mtime_ns / 1e9 >= grace
        }
        return sorted({name for merged in settled for name in self.replaced_by(merged)})


def listed(lake: Lake, stream: Stream, day: date | None = None) -> Folder:
    """The folder of `stream` (of `day`, for a daily stream) as a merge sees it now."""
    infos = lake.listing(stream, [day] if stream.daily else None)
    files = {PurePosixPath(info.path).name: info for info in infos}
    replaces = {}
    if len(files) > 1:  # a lone file replaces nothing that is still there
        for name, info in files.items():
            if name.startswith(MERGED_PREFIX):
                with contextlib.suppress(FileNotFoundError):  # another merge deleted it
                    replaces[name] = json.loads(lake.read_metadata(info.path).get(REPLACES, "[]"))
    return Folder(files, replaces)


def merged_name(inputs: list[str]) -> str:
    """The merged file's connection name: the same inputs always make the same file."""
    digest = hashlib.sha256("\n".join(sorted(inputs)).encode()).hexdigest()[:20]
    return f"{MERGED_PREFIX}{digest}"


def write_merged(
    lake: Lake, stream: Stream, folder: Folder, inputs: list[str], day: date | None = None
) -> str:
    """Write the rows of `inputs` as one merged file, each original file's rows once (an
    original file before merged copies of it); returns its name."""
    schema = file_schema(stream.schema).append(pa.field(ORIGIN, pa.string()))
    merged = dataclasses.replace(stream, schema=schema)
    # Originals first: one written again after it was merged is the newer copy.
    ordered = sorted(inputs, key=lambda name: (name.startswith(MERGED_PREFIX), name))
    name = merged_name(inputs)
    with lake.writer(merged, name, day, {REPLACES: json.dumps(ordered)}) as out:
        taken: set[str] = set()
        for input_name in ordered:
            found: set[str] = set()
            for table in _origin_tables(lake, folder.files[input_name].path, schema):
                origins = table.column(ORIGIN)
                found.update(pc.unique(origins).to_pylist())
                if taken:
                    table = table.filter(pc.invert(pc.is_in(origins, pa.array(sorted(taken)))))
                out.write_table(table)
            taken |= found
    return f"{name}.parquet"


def _origin_tables(lake: Lake, path: str, schema: pa.Schema) -> Iterator[pa.Table]:
    """A file's rows as tables of `schema`, a row group at a time, each with its `_origin`:
    the file's own name for an original file. Pages are read against their checksums, so a
    damaged file stops the merge rather than being copied."""
    parquet = lake.parquet_file(path)
    stem = PurePosixPath(path).stem
    for group in range(parquet.num_row_groups):
        table = parquet.read_row_group(group)
        if ORIGIN not in table.column_names:
            table = table.append_column(ORIGIN, pa.array([stem] * table.num_rows, pa.string()))
        for field in schema:  # a file written before a column was declared reads it as null
            if field.name not in table.column_names:
                table = table.append_column(field.name, pa.nulls(table.num_rows, field.type))
        yield table.select(schema.names).cast(schema)


def remove(lake: Lake, folder: Folder, names: list[str]) -> int:
    """Delete files of the folder (another merge may have deleted them first); how many."""
    removed = 0
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            lake.fs.delete_file(folder.files[name].path)
            removed += 1
    return removed


@dataclass(frozen=True)
class Merged:
    """What a merge of one folder did."""

    written: str | None
    inputs: int
    removed: int


def merge_folder(
    lake: Lake,
    stream: Stream,
    day: date | None = None,
    moving: Callable[[Collection[str]], Collection[str]] = lambda names: (),
    grace: float = GRACE_SECONDS,
) -> Merged:
    """Merge one folder of `stream`: write its inputs as one file, then delete the files
    replaced `grace` seconds ago or more (with `grace` 0, this merge's inputs too).
    `moving`: of the files named, those a writer may still write again with other rows
    (`pipelines/push/ledger_merge.py`); they wait for a later merge."""
    folder = listed(lake, stream, day)
    inputs = folder.inputs(moving(folder.inputs()))
    written = None
    if len(inputs) > 1:
        written = write_merged(lake, stream, folder, inputs, day)
        folder = listed(lake, stream, day)
    removed = remove(lake, folder, folder.leftovers(time.time(), grace))
    return Merged(written, len(inputs) if written else 0, removed)
