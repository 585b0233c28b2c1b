"""The closed days of the product's daily streams as tables of the warehouse file, and the
record of what a warehouse file holds (`Built`). pipelines/warehouse/__init__.py says why and when.

A day is closed once landings no longer rewrite it: before the last `OPEN_DAYS` days (today
and yesterday, what the hourly schedules land). Its rows are copied into
`_lake."<service>.<stream>"`, a table with the stream's declared columns and its `date`; the
stream's view reads that table and the open days' files. A closed day is copied whole and
replaced whole when its files change, so the table always holds each closed day exactly as
the lake does at the last build.
"""

from __future__ import annotations

import functools
import threading
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path, PurePosixPath

import duckdb
import pyarrow as pa

from pipelines.errors import Damaged
from pipelines.lake import DAILY_READ, Lake, file_day, file_schema, parquet_read, sql_literal
from pipelines.pull.damaged import unreadable
from pipelines.stream import Stream
from pipelines.warehouse.progress import StreamCopy

#: The days up to today whose files a view reads from the lake at each query.
OPEN_DAYS = 2
#: How a view reads one open day's files: their columns by name, the `date` not from the path.
OPEN_DAY_READ = "hive_partitioning = false, union_by_name = true"
SCHEMA = "_lake"


def first_open_day(today: date) -> date:
    return today - timedelta(days=OPEN_DAYS - 1)


def table_of(stream: Stream) -> str:
    return f'{SCHEMA}."{stream.relation}"'


def dated(stream: Stream) -> pa.Schema:
    """The columns a daily stream's relations show: its declared ones and its `date`."""
    return file_schema(stream.schema).append(pa.field("date", pa.date32()))


@functools.cache
def _describer() -> duckdb.DuckDBPyConnection:
    """The process's one in-memory DuckDB for `duckdb_columns`: opening a database costs
    far more than the question (bench: peer), and a build asks about some twenty schemas."""
    return duckdb.connect()


@functools.cache
def duckdb_columns(schema: pa.Schema) -> list[tuple[str, str]]:
    """Each column of `schema` with the DuckDB type it reads as; asked once per process
    (builds and empty relations ask for the same few schemas again and again), each time
    on a cursor of its own (threads may ask at once) of one database."""
    empty = schema.empty_table()  # noqa: F841 - read by the query below
    with _describer().cursor() as con:
        described = con.execute("DESCRIBE SELECT * FROM empty").fetchall()
    return [(name, kind) for name, kind, *_ in described]


@dataclass(frozen=True)
class Listing:
    """A daily stream's files, day by day, from one listing of the lake: each day's paths
    and a signature that changes whenever one of its files is written, added or removed."""

    files: dict[date, list[str]]
    signatures: dict[date, str]

    @classmethod
    def of(cls, lake: Lake, stream: Stream) -> Listing:
        by_day: dict[date, dict[str, int]] = defaultdict(dict)
        for path, written in lake.written(stream).items():
            by_day[file_day(path)][path] = written
        return cls(
            files={day: sorted(files) for day, files in by_day.items()},
            signatures={
                day: ";".join(f"{PurePosixPath(p).name}@{ns}" for p, ns in sorted(files.items()))
                for day, files in by_day.items()
            },
        )

    def closed(self, first_open: date) -> dict[date, str]:
        return {day: sig for day, sig in self.signatures.items() if day < first_open}

    def open_days(self, first_open: date) -> list[date]:
        return sorted(day for day in self.files if day >= first_open)


@dataclass(frozen=True)
class Built:
    """What a warehouse file says of its build: the fingerprint of its statements and of its
    definitions (SQL files, declared streams), its first open day, what its views read from
    the lake (`(relation, day)` for an open day, `(relation, None)` for a relation with
    files) and each copied closed day's signature, by relation."""

    fingerprint: str
    definitions: str
    first_open: date
    read: frozenset[tuple[str, date | None]]
    copied: dict[str, dict[date, str]]


def built_state(path: Path) -> Built | None:
    """The record of the warehouse file at `path`; None where there is no file, it predates
    the record, or a read-write session holds it (a rebuild beside it is due either way).
    Read through an attachment of its own: a connection to the path from this process may
    be DuckDB's cached one, on the file the path named when it opened."""
    if not path.exists():
        return None
    with duckdb.connect() as con:
        try:
            con.execute(f"ATTACH {sql_literal(str(path))} AS warehouse (READ_ONLY)")
        except duckdb.Error:
            return None
        return recorded(con, "warehouse")


def recorded(con: duckdb.DuckDBPyConnection, database: str) -> Built | None:
    """The record of the warehouse file attached to `con` as `database`; None without one."""
    schema = f"{database}.{SCHEMA}"
    try:
        fingerprint, definitions, first_open = con.execute(
            f"SELECT fingerprint, definitions, first_open FROM {schema}.build"
        ).fetchone()
        read = con.execute(f"SELECT relation, day FROM {schema}.read").fetchall()
        copied: dict[str, dict[date, str]] = defaultdict(dict)
        for relation, day, signature in con.execute(
            f"SELECT relation, day, files FROM {schema}.copied"
        ).fetchall():
            copied[relation][day] = signature
    except (duckdb.Error, TypeError):  # TypeError: an empty record
        return None
    return Built(fingerprint, definitions, first_open, frozenset(read), dict(copied))


def record(con: duckdb.DuckDBPyConnection, built: Built) -> None:
    """Write `built` into the database `con` uses."""
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    con.execute(
        f"CREATE OR REPLACE TABLE {SCHEMA}.build "
        "(fingerprint VARCHAR, definitions VARCHAR, first_open DATE)"
    )
    con.execute(
        f"INSERT INTO {SCHEMA}.build VALUES (?, ?, ?)",
        [built.fingerprint, built.definitions, built.first_open],
    )
    read = pa.table(
        {
            "relation": pa.array([relation for relation, _ in built.read], pa.string()),
            "day": pa.array([day for _, day in built.read], pa.date32()),
        }
    )
    copied = [(rel, day, sig) for rel, days in built.copied.items() for day, sig in days.items()]
    files = pa.table(
        {
            "relation": pa.array([row[0] for row in copied], pa.string()),
            "day": pa.array([row[1] for row in copied], pa.date32()),
            "files": pa.array([row[2] for row in copied], pa.string()),
        }
    )
    # From Arrow tables, one statement each: a year of days row by row takes a second.
    for name, table in (("read", read), ("copied", files)):
        con.register("recorded_rows", table)
        con.execute(f"CREATE OR REPLACE TABLE {SCHEMA}.{name} AS SELECT * FROM recorded_rows")
        con.unregister("recorded_rows")


def _table_ready(con: duckdb.DuckDBPyConnection, stream: Stream) -> bool:
    """Make the stream's table hold its declared columns, stored as `_definition` says;
    False if it had to be made anew (it did not exist, or its definition changed: an older
    build's table, with an index on its key, among them), so none of its days is copied yet."""
    found = con.execute(
        "SELECT sql FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = ? AND table_name = ?",
        [SCHEMA, stream.relation],
    ).fetchall()
    if found == [(_rendered(stream),)]:
        return True
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    con.execute(f"CREATE OR REPLACE TABLE {table_of(stream)} ({_definition(stream)})")
    return False


def _definition(stream: Stream) -> str:
    """The table's columns. The text columns of the key that identify a row (`id`, `…_id`,
    `…_uuid`) are stored uncompressed: a lookup by one scans it as fast as a native table's, where
    DuckDB's compressed strings are decompressed row by row (docs/warehouse.md). No index:
    building one holds every key in memory, which the build's memory limit refuses past a
    few million rows."""

    def identifies(name: str, kind: str) -> bool:
        named = name == "id" or name.endswith(("_id", "_uuid"))
        return name in stream.key and named and kind == "VARCHAR"

    return ", ".join(
        f'"{name}" {kind}' + (" USING COMPRESSION uncompressed" if identifies(name, kind) else "")
        for name, kind in duckdb_columns(dated(stream))
    )


@functools.cache
def _rendered(stream: Stream) -> str:
    """The table's definition as DuckDB writes it in `duckdb_tables()`, to compare with a
    table found in the file; made once per process in the describer's database."""
    with _rendering, _describer().cursor() as con:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        con.execute(f"CREATE OR REPLACE TABLE {table_of(stream)} ({_definition(stream)})")
        [(rendered,)] = con.execute(
            "SELECT sql FROM duckdb_tables() WHERE schema_name = ? AND table_name = ?",
            [SCHEMA, stream.relation],
        ).fetchall()
        con.execute(f"DROP TABLE {table_of(stream)}")
    return rendered


#: Threads of one process may render tables at once, in one database.
_rendering = threading.Lock()


class DamagedCopy(Damaged):
    """A closed day's file whose pages do not read: the build stops before copying it, and
    its caller sets the file aside (`pipelines/warehouse/relations.py`)."""

    def __init__(self, stream: Stream, path: str, reason: str, uri: str) -> None:
        super().__init__(f"{uri}: {reason}")
        self.stream, self.path, self.reason = stream, path, reason


def copy_closed_days(
    con: duckdb.DuckDBPyConnection,
    lake: Lake,
    stream: Stream,
    listing: Listing,
    first_open: date,
    copied: dict[date, str],
    progress: StreamCopy,
) -> dict[date, str]:
    """Make the stream's table hold exactly its closed days as `listing` shows them, given
    what it held (`copied`): days gone or changed are deleted, days new or changed are read
    from their files, in the order of the days. Returns what the table holds now."""
    if not _table_ready(con, stream):
        copied = {}
    closed = listing.closed(first_open)
    stale = sorted(day for day, sig in copied.items() if closed.get(day) != sig)
    fresh = sorted(day for day, sig in closed.items() if copied.get(day) != sig)
    progress.copying(len(fresh), len(stale))
    table = table_of(stream)
    if stale:
        con.execute(f"DELETE FROM {table} WHERE date IN (SELECT unnest(?::DATE[]))", [stale])
    if fresh:
        for path in (p for day in fresh for p in listing.files[day]):
            # DuckDB reads pages without their checksums: a damaged one would be copied as
            # wrong values, for good. The build fails naming the file, which its caller sets
            # aside (`pipelines/warehouse/relations.py`).
            if (reason := unreadable(lake, path, pages=True)) is not None:
                raise DamagedCopy(stream, path, reason, lake.uri(path))
        files = ", ".join(sql_literal(lake.uri(p)) for day in fresh for p in listing.files[day])
        source = parquet_read(stream, f"[{files}]", DAILY_READ)
        present = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
        columns = ", ".join(
            f'"{name}"' for name, _ in duckdb_columns(dated(stream)) if name in present
        )
        con.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {source}")
    progress.done()
    return closed


def source_of(lake: Lake, stream: Stream, open_days: list[date]) -> str:
    """SQL reading a copied stream: its table, and the folder of each open day, its `date` a
    constant of its own branch rather than read from the folders' names: a query whose date
    bound excludes a day reads none of its files, and one that reads the days (a bound by
    subquery: `max(date)`, then the range) parses no path."""
    table = f"SELECT * FROM {table_of(stream)}"
    folder = lake.uri(lake.stream_dir(stream))
    days = [
        f"SELECT *, DATE '{day.isoformat()}' AS date FROM "
        + parquet_read(
            stream, sql_literal(f"{folder}/date={day.isoformat()}/*.parquet"), OPEN_DAY_READ
        )
        for day in open_days
    ]
    return "(" + " UNION ALL BY NAME ".join(f"({branch})" for branch in [table, *days]) + ")"
