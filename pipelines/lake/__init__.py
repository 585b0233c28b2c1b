"""The Parquet lake: one explicit Arrow schema per stream, files written whole or not at all.

Layout (docs/data-flows.md):

    <lake>/<service>/<stream>/<connection>.parquet                 snapshot streams
    <lake>/<service>/<stream>/date=YYYY-MM-DD/<connection>.parquet  daily streams

One file per connection, so a run for one connection (or one day) replaces exactly what it
pulled. Every file is written under a temporary name in its own folder and renamed into
place, so a reader or a crash never sees half a file and a re-run replaces, never adds. A
write that fails removes its temporary file; one a killed process left is removed by
`Lake.sweep_temporary`.

What else lies in the lake (a README, a `_SUCCESS` marker, a folder made by hand, another
tool's export) the lake did not write: `stream_file` is the one decision of what is a
stream's file, and no reader takes anything else for a day or a connection.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import threading
import uuid
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path, PurePosixPath

import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pydantic

from pipelines.lake import object_store
from pipelines.lake.held_files import held_while_written, remove_unless_held
from pipelines.stream import EXTRA, Stream

#: The longest name of a file in the lake (before `.parquet`): a connection's name.
MAX_NAME = 64
CONNECTION_NAME = re.compile(rf"[a-z0-9][a-z0-9_-]{{0,{MAX_NAME - 1}}}")
TEMPORARY_SUFFIX = ".tmp"
#: The folder of one day of a daily stream.
DAY_FOLDER = re.compile(r"date=(\d{4}-\d{2}-\d{2})")
#: What a view reads of a stream's folder, as DuckDB globs (`Lake.relation`): the files of
#: its day folders for a daily stream, the files in it for another.
DAILY_GLOB = "date=*/*.parquet"
SNAPSHOT_GLOB = "*.parquet"
#: How DuckDB reads a daily stream's files: the `date` from their folders, columns by name
#: (a file landed before a column was declared reads it as null).
DAILY_READ = "hive_partitioning = true, hive_types = {'date': DATE}, union_by_name = true"
#: The most days of a daily stream whose files are listed a folder each (`Lake.written`).
DAYS_LISTED_APART = 31
#: Rows buffered before a row group is written: what a landing holds in memory at most
#: (bench: pull, peak memory).
ROW_GROUP_ROWS = 10_000
#: DuckDB's memory for a query that reduces the lake to a few figures (checks, the members
#: seen in messages): beyond it DuckDB spills to the system's temporary folder, so a check
#: over a year of rows stays within the sync's memory (bench: pull, peak memory) and takes
#: no longer. Not for queries whose answer is rows (the push's): those need their size.
#: The column a merged file adds (`pipelines/lake/merge.py`): the name, without `.parquet`, of
#: the file each of its rows was first written to.
ORIGIN = "_origin"
SPILL_SETTINGS = {
    "memory_limit": "16MB",
    "threads": 1,  # each thread needs buffers of its own
    "preserve_insertion_order": False,
}


def sql_literal(text: str) -> str:
    """`text` as a DuckDB string literal."""
    return "'" + text.replace("'", "''") + "'"


def parquet_read(stream: Stream, files: str, options: str) -> str:
    """DuckDB SQL reading `files` (a glob or a list, as SQL) of `stream` with `options`.

    A merged stream's rows are read once each: while a merge's file and the files it
    replaces are both in a folder (`pipelines/lake/merge.py`), each original file's rows are
    read from one file only, the original where it is present (a per-run file written again
    is newer than its merged copy), else the first merged file by name. One glob lists the
    files once, so the reader sees one state of the folder whatever a merge does meanwhile.
    The empty branch gives `_origin` to a read of files that all predate merging."""
    read = f"read_parquet({files}, {options})"
    if not stream.merged:
        return read
    origin = f"coalesce({ORIGIN}, parse_filename(filename, true))"
    chosen = f"arg_min(filename, ({ORIGIN} IS NOT NULL, filename))"
    return (
        f"(SELECT * EXCLUDE (filename, {ORIGIN}) FROM ("
        f"SELECT * FROM read_parquet({files}, {options}, filename = true) "
        f"UNION ALL BY NAME SELECT NULL::VARCHAR AS {ORIGIN} WHERE false) "
        f"QUALIFY filename = {chosen} OVER (PARTITION BY parse_dirpath(filename), {origin}))"
    )


def file_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` without its columns' descriptions: they belong to the catalog, not to every
    file of the lake."""
    return pa.schema([field.remove_metadata() for field in schema], metadata=schema.metadata)


def check_connection_name(name: str) -> str:
    if not CONNECTION_NAME.fullmatch(name):
        raise ValueError(
            f"connection name {name!r}: use 1-{MAX_NAME} lowercase letters, digits, '_' or '-'"
        )
    return name


class LakeLocation(pydantic.BaseModel):
    """Where the lake and the warehouse live (`LAKE_ROOT`, `WAREHOUSE_PATH`), and the extra
    SQL folders the warehouse is built from (`WAREHOUSE_SQL`, pipelines/settings.py)."""

    lake_root: str = "data/lake"
    warehouse_path: str = "data/warehouse.duckdb"
    warehouse_sql: list[str] = []

    def lake(self) -> Lake:
        return verified_lake(self.lake_root)


_verified_roots: set[str] = set()
_verified_lock = threading.Lock()


def verified_lake(root: str | os.PathLike[str]) -> Lake:
    """The lake at `root`, its store checked once per process and root (`Lake.verify`: two
    requests on an object store, nothing for a folder), so a wrong bucket, endpoint or key
    fails a command or a step with what to fix rather than with the store's first refusal."""
    lake = Lake(root)
    with _verified_lock:
        if lake.place.uri not in _verified_roots:
            lake.verify()
            _verified_roots.add(lake.place.uri)
    return lake


class Lake:
    """The lake at a local folder or on an object store (`pipelines/lake/object_store.py`): one
    pyarrow filesystem and a root in it, the same layout and promises on both. A file is
    named by its path in that filesystem (`path`, `files`)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.place = object_store.place(root)
        self.fs = self.place.fs
        self.root = self.place.root

    def stream_dir(self, stream: Stream) -> str:
        return f"{self.root}/{stream.service}/{stream.name}"

    def path(self, stream: Stream, connection: str, day: date | None = None) -> str:
        folder = self.stream_dir(stream)
        if stream.daily:
            if day is None:
                raise ValueError(f"{stream.relation} is daily: a day is needed")
            folder = f"{folder}/date={day.isoformat()}"
        return f"{folder}/{check_connection_name(connection)}.parquet"

    def _listed(self, folder: str, recursive: bool = True) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(folder, allow_not_found=True, recursive=recursive)
        return [info for info in self.fs.get_file_info(selector) if info.is_file]

    def files(self, stream: Stream, days: Collection[date] | None = None) -> list[str]:
        return sorted(self.written(stream, days))

    def days(self, stream: Stream, connection: str) -> list[date]:
        """The days already landed for one connection: the lake is the state."""
        name = f"{connection}.parquet"
        return sorted(file_day(p) for p in self.files(stream) if PurePosixPath(p).name == name)

    def written(self, stream: Stream, days: Collection[date] | None = None) -> dict[str, int]:
        """Each file of the stream (of a daily stream, of `days` only where given) and when it
        was last written (ns; an object store keeps whole seconds)."""
        return {info.path: info.mtime_ns for info in self.listing(stream, days)}

    def listing(self, stream: Stream, days: Collection[date] | None = None) -> list[pafs.FileInfo]:
        """The stream's files as the lake lists them (path, size, time). Up to
        `DAYS_LISTED_APART` days are listed a folder each, so what a run of a few days costs
        does not grow with the stream's history; more, or the whole stream, in one listing."""
        return self.sorted_out(stream, days)[0]

    def sorted_out(
        self, stream: Stream, days: Collection[date] | None = None
    ) -> tuple[list[pafs.FileInfo], list[pafs.FileInfo]]:
        """One listing of the stream's folder (as `listing`), sorted out: the stream's files
        (`stream_file`), and the strays, the other files a view's glob would read (another
        tool's `part-0.snappy.parquet` in a day's folder), which its reader sets aside
        (`pipelines/pull/damaged.py`). The rest (a README, a marker, a folder) nothing reads."""
        folder = self.stream_dir(stream)
        if days is not None and stream.daily and len(days) <= DAYS_LISTED_APART:
            listed = [
                info
                for day in sorted(days)
                for info in self._listed(f"{folder}/date={day.isoformat()}", recursive=False)
            ]
        else:
            listed = self._listed(folder)
        own, strays = [], []
        for info in listed:
            relative = info.path.removeprefix(folder + "/")
            if stream_file(stream, relative):
                own.append(info)
            elif globbed(relative, DAILY_GLOB if stream.daily else SNAPSHOT_GLOB):
                strays.append(info)
        if days is not None and stream.daily:
            own = [info for info in own if file_day(info.path) in days]
            # A stray in a folder that names no day is of no day: a look at the whole stream
            # finds it.
            strays = [info for info in strays if folder_day(info.path) in days]
        return own, strays

    def unrecognised(
        self, listed: Iterable[pafs.FileInfo], streams: Iterable[Stream], kept: Collection[str]
    ) -> list[str]:
        """What a listing of the whole lake (recursive, from its root) holds that the lake did
        not write, each named once (a folder, not what is in it): at the root, what is no
        service's folder nor one of `kept` (the lake's own folders, `_damaged` and the like);
        in a service's folder, what is no stream's folder; in a stream's, what is none of its
        day folders or files (`stream_file`). A stream written by others is theirs whole."""
        by_folder = {(s.service, s.name): s for s in streams}
        services = {service for service, _ in by_folder}
        named: set[str] = set()
        for info in sorted(listed, key=lambda info: info.path):
            relative = info.path.removeprefix(self.root + "/")
            parts = relative.split("/")
            inside = any("/".join(parts[:n]) in named for n in range(1, len(parts)))
            if inside or parts[0] in kept or lake_temporary(parts[-1]):
                continue
            folder = info.type == pafs.FileType.Directory
            if len(parts) == 1:
                ours = folder and parts[0] in services
            elif len(parts) == 2:
                ours = folder and (parts[0], parts[1]) in by_folder
            else:
                # A store may list no folder where no object names one: the path decides.
                stream = by_folder.get((parts[0], parts[1]))
                rest = "/".join(parts[2:])
                if stream is None:
                    ours = False
                elif stream.written_by_others:
                    ours = True
                elif folder:
                    ours = stream.daily and len(parts) == 3 and day_of(rest) is not None
                else:
                    ours = stream_file(stream, rest)
            if not ours:
                named.add(relative)
        return sorted(self.uri(f"{self.root}/{relative}") for relative in named)

    def uri(self, path: str) -> str:
        """A file's name in a DuckDB connection from `connect`."""
        return self.place.uri + path.removeprefix(self.root)

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).is_file

    def modified_ns(self, path: str) -> int:
        """When a file was last written (ns; an object store keeps whole seconds)."""
        return self.fs.get_file_info(path).mtime_ns

    def parquet_file(self, path: str) -> pq.ParquetFile:
        # Pages carry checksums (`writer`): a damaged one fails here, not as wrong rows.
        return pq.ParquetFile(self.fs.open_input_file(path), page_checksum_verification=True)

    def footer(self, path: str) -> pq.FileMetaData:
        return pq.read_metadata(self.fs.open_input_file(path))

    def read_table(self, path: str, columns: list[str] | None = None) -> pa.Table:
        return self.parquet_file(path).read(columns=columns)

    def read_columns(self, files: Iterable[str], columns: list[str]) -> pa.Table:
        """Some columns of several files, one file at a time (pyarrow.dataset would do, but
        it brings pandas and its memory into every process that lands a stream;
        bench: memory)."""
        return pa.concat_tables(self.read_table(f, columns) for f in files)

    def read_metadata(self, path: str) -> dict[str, str]:
        raw = self.footer(path).metadata or {}
        return {k.decode(): v.decode() for k, v in raw.items() if not k.startswith(b"ARROW")}

    @contextmanager
    def writer(
        self,
        stream: Stream,
        connection: str,
        day: date | None = None,
        metadata: dict[str, str] | None = None,
    ) -> Iterator[PartitionWriter]:
        """Write one file in batches; it appears under its name only if the block succeeds.

        If the block or the final flush raises, the buffered rows are dropped unwritten (the
        failure is often in them) and the temporary file is removed: a failed write leaves
        the previous file, or none, and nothing else."""
        schema = file_schema(stream.schema).with_metadata(
            {
                **(stream.schema.metadata or {}),
                **{k.encode(): v.encode() for k, v in (metadata or {}).items()},
            }
        )
        with self.placed(self.path(stream, connection, day)) as temporary:
            writer = PartitionWriter(
                pq.ParquetWriter(temporary, schema, compression="zstd", write_page_checksum=True),
                schema,
            )
            try:
                yield writer
                writer.close()
            except BaseException:
                writer.abort()
                raise

    @contextmanager
    def placed(self, target: str) -> Iterator[str]:
        """A local temporary file that becomes `target` whole when the block succeeds.

        The one place where the two kinds of lake differ: on a local disk the file is
        written beside its target and renamed over it; on an object store it is written to
        the system's temporary folder, then uploaded, and an object is seen only once its
        upload completes (`object_store.upload`)."""
        name = f".{PurePosixPath(target).name}.{uuid.uuid4().hex}{TEMPORARY_SUFFIX}"
        held = None
        if self.place.local:
            folder = PurePosixPath(target).parent
            self.fs.create_dir(str(folder))
            temporary = Path(folder, name)
            held = held_while_written(temporary)
        else:
            temporary = Path(object_store.temporary_folder(), name)
        try:
            yield str(temporary)
            if self.place.local:
                os.replace(temporary, target)
            else:
                object_store.upload(self.fs, temporary, target)
        finally:
            temporary.unlink(missing_ok=True)
            if held is not None:
                os.close(held)  # releases the lock

    def write(
        self,
        stream: Stream,
        connection: str,
        rows: Iterable[dict],
        day: date | None = None,
        metadata: dict[str, str] | None = None,
    ) -> int:
        with self.writer(stream, connection, day, metadata) as out:
            out.extend(rows)
        return out.rows

    def put(self, path: str, table: pa.Table) -> None:
        """Write a file of the lake's own (not a stream's) whole, or not at all."""
        with self.placed(path) as temporary:
            pq.write_table(table, temporary, compression="zstd", write_page_checksum=True)

    def drop(self, stream: Stream, connection: str, day: date) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self.path(stream, connection, day))

    def relation(self, stream: Stream, days: Collection[date] | None = None) -> str | None:
        """DuckDB SQL reading every file of the stream (daily ones with their `date`; of
        `days` only, where given), or None while it has none: DuckDB refuses a glob that
        matches nothing. A connection from `connect` reads it wherever the lake is."""
        if days is not None and stream.daily:
            files = self.files(stream, days)
            if not files:
                return None
            listed = ", ".join(sql_literal(self.uri(f)) for f in files)
            return parquet_read(stream, f"[{listed}]", DAILY_READ)
        if not self.files(stream):
            return None
        folder = self.uri(self.stream_dir(stream))
        # By name: a file landed before a column was declared (`_extra`) reads it as null.
        if stream.daily:
            return parquet_read(stream, sql_literal(f"{folder}/{DAILY_GLOB}"), DAILY_READ)
        glob = sql_literal(f"{folder}/{SNAPSHOT_GLOB}")
        return parquet_read(stream, glob, "hive_partitioning = false, union_by_name = true")

    def connect(
        self,
        database: str = ":memory:",
        *,
        read_only: bool = False,
        spill: bool = False,
        config: dict[str, object] | None = None,
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection that reads the lake's `relation()`s and the warehouse's views
        over them: on an object store, through the lake's filesystem (`pipelines/lake/files.py`).
        `spill`: keep to `SPILL_SETTINGS`' memory, for a query that aggregates the history;
        `config`: other settings, spilling to the same folder unless they name one."""
        if spill:
            config = SPILL_SETTINGS
        if config and "temp_directory" not in config:
            config = {**config, "temp_directory": object_store.temporary_folder()}
        con = duckdb.connect(database, read_only=read_only, config=config or {})
        if not self.place.local:
            from pipelines.lake.files import LakeFiles  # fsspec: for a lake on a store only

            con.register_filesystem(LakeFiles(self.fs))
        return con

    def query(
        self, sql: str, parameters: list | dict | None = None, *, spill: bool = False
    ) -> list[tuple]:
        """Run SQL over `relation()`s in a DuckDB of its own: the module-level default
        connection is shared by every thread of the process, and checks run side by side.
        `spill`: as for `connect`."""
        with self.connect(spill=spill) as con:
            return con.execute(sql, parameters).fetchall()

    def verify(self) -> None:
        """On an object store, whether the bucket, the endpoint and the key work (two
        requests), told naming the setting to fix; nothing to ask of a local folder."""
        object_store.verify(self.place)

    def sweep_temporary(self) -> int:
        """Remove the temporary files a killed run left behind; none of them is data. One a
        live run is writing (a sync beside this one) is locked, and kept. On an object store
        there are none (a file is uploaded only once whole), so its objects are
        not listed for them."""
        if not self.place.local:
            return 0
        swept = 0
        for info in self._listed(self.root):
            name = PurePosixPath(info.path).name
            if name.startswith(".") and name.endswith(TEMPORARY_SUFFIX):
                swept += remove_unless_held(info.path)
        return swept


def lake_temporary(name: str) -> bool:
    """Whether a file's name is one `Lake.placed` gives a file while it is written (with
    `.new` for the instant before it is held, `held_while_written`)."""
    return name.startswith(".") and name.removesuffix(".new").endswith(TEMPORARY_SUFFIX)


def day_of(folder: str) -> date | None:
    """The day a folder's name (`date=YYYY-MM-DD`) is of; None for any other name."""
    found = DAY_FOLDER.fullmatch(folder)
    if found is None:
        return None
    try:
        return date.fromisoformat(found.group(1))
    except ValueError:  # 2026-02-30
        return None


def globbed(relative: str, glob: str) -> bool:
    """Whether a DuckDB glob reads the path: each `*` within one folder's or file's name,
    never across a `/` (`pipelines/lake/files.py` reads an object store's alike)."""
    parts, wanted = relative.split("/"), glob.split("/")
    return len(parts) == len(wanted) and all(map(fnmatch.fnmatchcase, parts, wanted))


def stream_file(stream: Stream, relative: str) -> bool:
    """Whether `relative`, a path in `stream`'s folder, is one of the stream's files: the
    one decision of what the lake takes for its own. The lake writes `<name>.parquet`, the
    name one a connection may have (`CONNECTION_NAME`; merged files and the receivers' too),
    in a `date=YYYY-MM-DD` folder for a daily stream. A stream written by others (a
    `WAREHOUSE_SQL` source) is whatever Parquet its views read."""
    if stream.written_by_others:
        return globbed(relative, DAILY_GLOB) or globbed(relative, SNAPSHOT_GLOB)
    *folders, name = relative.split("/")
    stem = name.removesuffix(".parquet")
    if stem == name or not CONNECTION_NAME.fullmatch(stem):
        return False
    if not stream.daily:
        return not folders
    return len(folders) == 1 and day_of(folders[0]) is not None


def folder_day(path: str) -> date | None:
    """The day of the folder a file is in; None where that names no day."""
    return day_of(PurePosixPath(path).parent.name)


def file_day(path: str) -> date:
    """The day of a daily stream's file (`stream_file`), from its `date=` folder."""
    day = folder_day(path)
    if day is None:
        raise ValueError(f"{path}: not in a day's folder (date=YYYY-MM-DD)")
    return day


def file_stem(path: str) -> str:
    """A file's name without `.parquet`: its connection (or record type)."""
    return PurePosixPath(path).stem


class PartitionWriter:
    """Buffers rows (Python dicts, or Arrow tables of rows) and writes them as row groups of
    the stream's schema, in the order they came."""

    def __init__(self, writer: pq.ParquetWriter, schema: pa.Schema) -> None:
        self._writer: pq.ParquetWriter | None = writer
        self._schema = schema
        self._buffer: list[dict] = []
        self._tables: list[pa.Table] = []
        self._table_rows = 0
        self.rows = 0

    def extend(self, rows: Iterable[dict] | Iterable[pa.Table]) -> None:
        for row in rows:
            if isinstance(row, pa.Table):
                self._add_table(row)
                continue
            if self._tables:
                self._flush_tables()
            self._buffer.append(row)
            if len(self._buffer) >= ROW_GROUP_ROWS:
                self._flush()

    def _conformed(self, table: pa.Table) -> pa.Table:
        """`table` as the schema's columns; without `_extra` (rows read back from a file
        landed before it was declared), with it null."""
        if EXTRA.name in self._schema.names and EXTRA.name not in table.column_names:
            table = table.append_column(EXTRA.name, pa.nulls(table.num_rows, EXTRA.type))
        table = table.select(self._schema.names)
        return table if table.schema.equals(self._schema) else table.cast(self._schema)

    def _add_table(self, table: pa.Table) -> None:
        """Rows as a table: small ones (a page) are gathered into one row group."""
        self._flush()
        table = self._conformed(table)
        self._tables.append(table)
        self._table_rows += table.num_rows
        if self._table_rows >= ROW_GROUP_ROWS:
            self._flush_tables()

    def write_table(self, table: pa.Table) -> None:
        """Rows as a table, written at once as row groups of their own."""
        self._flush()
        self._flush_tables()
        assert self._writer is not None
        self._writer.write_table(self._conformed(table))
        self.rows += table.num_rows

    def _flush(self) -> None:
        if self._buffer and self._writer is not None:
            self._writer.write_table(pa.Table.from_pylist(self._buffer, schema=self._schema))
            self.rows += len(self._buffer)
            self._buffer = []

    def _flush_tables(self) -> None:
        if self._tables and self._writer is not None:
            self._writer.write_table(pa.concat_tables(self._tables))
            self.rows += self._table_rows
            self._tables, self._table_rows = [], 0

    def close(self) -> None:
        if self._writer is not None:
            self._flush()
            self._flush_tables()
            self._writer.close()
            self._writer = None

    def abort(self) -> None:
        """Close the file without writing what is buffered: it is about to be removed."""
        self._buffer, self._tables, self._table_rows = [], [], 0
        writer, self._writer = self._writer, None
        if writer is not None:
            # Only the file handle matters now; the error that led here is the one to report.
            with contextlib.suppress(Exception):
                writer.close()
