"""`warehouse.duckdb`: views over the lake, defined by the SQL files in `sql/` and in the
folders `WAREHOUSE_SQL` lists (pipelines/settings.py).

Pipeline steps only write Parquet (docs/data-flows.md). The views read the lake's
files when queried, so new partitions show up without touching the warehouse file; it is
rebuilt only when a definition changes: a new SQL file, or a stream's first file (DuckDB
refuses a view over a glob that matches nothing, so until then the view is a typed empty
relation, and the first file changes it to a `read_parquet`).

A rebuild never writes into the file analysts have open: it builds a new file beside it and
renames it into place (`Warehouse.refresh`), so neither a read-only nor a read-write session
stands in its way; each keeps the file it opened until it reconnects.

**Closed days are tables.** A view that read every day file of a year's stream opened every
file's footer at each query. So the days of the product's daily streams that landings no
longer rewrite (before yesterday: `OPEN_DAYS`) are copied into tables of the warehouse file
(schema `_lake`), and a stream's view reads that table and, from the lake, the folders of its
open days only (`date=<day>/*.parquet`): a query runs at a table's speed and still sees each
row a landing writes into an open day at once. A rebuild copies what changed only: days that
closed since the last build, and closed days whose files changed (a backfill, a damaged file
landed again), each replaced whole. Its file starts as a copy of the old one, so the cost of a
rebuild is the changed days plus a file copy. What the file holds is recorded in it
(`_lake.build`, `_lake.read`, `_lake.copied`), so a landing's refresh that wrote only open days
of relations the views already read from the lake opens the file, compares, and is done,
without listing the lake (`Warehouse.refresh(written=...)`). A session opened before a rebuild
keeps the old file: it sees a closed day rewritten, or a new day's first file, once it
reconnects.

A SQL file refers to a stream as `{{ source('service', 'stream') }}`; that becomes a
`read_parquet` over the stream's files, or a typed empty relation while it has none. A pulled
stream no SQL file defines a view of (`<service>/<stream>.sql`) gets one from its
declaration (`declared_view`): its columns as declared, `_extra` as JSON.

A SQL folder holds one subfolder per schema (`sql/datahub/members.sql` defines a view of
schema `datahub`). The extra folders are laid out alike and built after `sql/`: schema by
schema in `schema_order`, within a schema `sql/`'s files first, then each extra folder's in
the order listed, each folder's by file name (a later file may replace an earlier view).

Their SQL may also name streams the product does not define (the demo's
`{{ source('shop', 'orders') }}`, demo/sql/shop): such a source reads the Parquet files
under `<lake>/<service>/<stream>/` (daily when it holds `date=` folders), whatever wrote them,
typed by the files themselves. The lake is the registry, so every process that builds the
warehouse (a sync, a push, a Dagster run) sees the same streams without importing the code
that writes them. Since there is no schema to type an empty relation with, such a stream
needs a file, even an empty one, before a build names it (demo/shop.py `declare_shop`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path, PurePosixPath

import duckdb
import pyarrow as pa

from pipelines.errors import Busy, SetupError, Unavailable, first_line
from pipelines.lake import Lake, sql_literal
from pipelines.lake.held_files import held, held_while_written, remove_unless_held
from pipelines.stream import Stream
from pipelines.warehouse.closed_days import (
    OPEN_DAYS,
    Built,
    Listing,
    built_state,
    copy_closed_days,
    dated,
    duckdb_columns,
    first_open_day,
    record,
    recorded,
    source_of,
)
from pipelines.warehouse.closed_days import SCHEMA as COPIES
from pipelines.warehouse.progress import streams_copied

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
#: The schemas built after all others, in this order: `sync` (the push's ledger), `outbound`
#: (what the push sends: reads the sources and the ledger), `marts` (reads them all). Every
#: other schema is a source (a service's streams, a user's own tables) and comes first.
LAST_SCHEMAS = ("sync", "outbound", "marts")
SOURCE = re.compile(r"\{\{\s*source\('(\w+)',\s*'(\w+)'\)\s*\}\}")
#: Appended to the warehouse file's name for the file a rebuild replaced while a read-write
#: session held it (`Warehouse.refresh`).
PREVIOUS_SUFFIX = ".previous"
#: The first line of a statement from a file: the file, for a message about it.
ORIGIN = "-- "
#: A relation named with its schema in SQL, each part quoted or not (a lookahead, so that
#: `memory.conversation.members` names `conversation.members` too).
QUALIFIED = re.compile(r'(?<![\w"])(?="?(\w+)"?\s*\.\s*"?(\w+)"?)')
#: What DuckDB raises for a view it cannot make from its SQL (not for a file it cannot read).
VIEW_MISTAKES = (
    duckdb.ParserException,
    duckdb.BinderException,
    duckdb.CatalogException,
    duckdb.NotImplementedException,
)
#: A build's mark, held while it lives: what a killed build left is removed by the next.
HELD_SUFFIX = ".held"
#: Appended to `.<file name>` for the lock builds on one host take turns with, and for the
#: folder a build spills to.
LOCK_SUFFIX = "-build.lock"
SPILL_SUFFIX = "-build.spill"
#: A build's DuckDB: copying a year of closed days stays within this memory, spilling beyond.
#: It runs in the sync's process after the landing, so it adds to the sync's peak (bench:
#: pull, peak memory); a lower limit costs the first build of a year a little more time.
BUILD_SETTINGS = {"memory_limit": "32MB", "threads": 1, "preserve_insertion_order": True}
#: The push's DuckDB (`Warehouse.in_memory`): its work tables (`pipelines/push/changes.py`,
#: a row per key of the view) spill to the system's temporary folder beyond this memory, so
#: the push's peak does not grow with its outbound views (bench/README.md, "The push's peak
#: memory bounded"); a query DuckDB cannot keep within it runs without it (`within_memory`).
#: One thread: each needs buffers of its own. The view's order is kept: a key's rows are
#: read in it (`row_number() OVER ()`).
PUSH_SETTINGS = {"memory_limit": "64MB", "threads": 1, "preserve_insertion_order": True}


def schema_order(schemas: Iterable[str]) -> list[str]:
    """The order schemas are built in: the sources by name, then `LAST_SCHEMAS`."""
    present = set(schemas)
    sources = sorted(present - set(LAST_SCHEMAS))
    return sources + [schema for schema in LAST_SCHEMAS if schema in present]


def schemas_of(sql_dirs: Iterable[Path]) -> list[str]:
    """The schemas the folders define (the subfolders holding SQL files), in build order."""
    found = {
        folder.name
        for sql_dir in sql_dirs
        for folder in sql_dir.iterdir()
        if folder.is_dir() and any(folder.glob("*.sql"))
    }
    return schema_order(found)


class WarehouseBusy(Busy):
    """The warehouse file cannot be replaced without losing a session's unsaved changes; the
    lake is unaffected."""


class WarehouseUnavailable(Unavailable):
    """The views could not be built: the lake or the warehouse's disk failed. Said naming
    the setting, and that the next build makes them."""


def sql_files(sql_dirs: Iterable[Path]) -> list[Path]:
    """The SQL files of the folders, each schema's subfolder's."""
    return sorted(file for sql_dir in sql_dirs for file in Path(sql_dir).glob("*/*.sql"))


def others_stream(service: str, name: str) -> Stream:
    """A stream a view names that the product does not define: written by others, typed by
    its files."""
    return Stream(service, name, pa.schema([]), written_by_others=True)


def others_streams(sql_dirs: Iterable[Path], defined: Iterable[Stream]) -> list[Stream]:
    """The streams the SQL files of the folders name that are none of `defined`: their
    folders in the lake are others' (`check` takes nothing in them for a stray)."""
    known = {(s.service, s.name) for s in defined}
    named = {m.groups() for file in sql_files(sql_dirs) for m in SOURCE.finditer(file.read_text())}
    return [others_stream(service, name) for service, name in sorted(named - known)]


def declared_view(stream: Stream) -> str:
    """The view of a stream no SQL file defines: its columns in declared order (a daily
    stream's `date` after `connection`), `_extra` as JSON."""
    names = [field.name for field in stream.schema]
    if stream.daily:
        names.insert(1 if names[:1] == ["connection"] else 0, "date")
    columns = ",\n    ".join(
        f'"{name}"::JSON AS "{name}"' if name == "_extra" else f'"{name}"' for name in names
    )
    source = f"{{{{ source('{stream.service}', '{stream.name}') }}}}"
    return f"CREATE OR REPLACE VIEW {stream.relation} AS\nSELECT\n    {columns}\nFROM {source};"


def read_by(queries: Iterable[str], views: dict[str, str]) -> set[str]:
    """The relations of `views` (each view's SQL by relation) that `queries` read, and those
    that these read in turn. A relation counts as read where its name appears, quoted or not:
    one named in a comment is defined too, which costs a little and changes no answer."""
    relations = {relation.lower(): relation for relation in views}
    wanted: set[str] = set()
    unread = list(queries)
    while unread:
        named = {f"{s}.{n}".lower() for s, n in QUALIFIED.findall(unread.pop())}
        for relation in {relations[r] for r in named.intersection(relations)} - wanted:
            wanted.add(relation)
            unread.append(views[relation])
    return wanted


def _empty_relation(schema: pa.Schema) -> str:
    typed = duckdb_columns(schema)
    columns = ", ".join(f'CAST(NULL AS {kind}) AS "{name}"' for name, kind in typed)
    return f"(SELECT {columns} LIMIT 0)"


@dataclass
class _Plan:
    """A build's view of the lake: its first open day, each copied stream's listing, and
    what the views it defines read from the lake (filled while they are made)."""

    first_open: date
    listings: dict[str, Listing]
    read: set[tuple[str, date | None]] = field(default_factory=set)


#: What a landing wrote: `(relation, day)` of a daily stream, `(relation, None)` of another.
Written = tuple[str, date | None]


class Warehouse:
    def __init__(
        self,
        path: str | Path,
        lake: Lake,
        streams: Iterable[Stream],
        sql_dir: Path = SQL_DIR,
        extra_sql: Sequence[str | Path] = (),
        viewed: Iterable[Stream] = (),
        clock: Callable[[], date] = lambda: datetime.now(UTC).date(),
    ) -> None:
        self.path = Path(path)
        self.lake = lake
        self.streams = {(s.service, s.name): s for s in streams}
        #: Streams that have a view whether or not a SQL file defines one.
        self.viewed = list(viewed)
        #: The product's folder first, then the extra ones (`WAREHOUSE_SQL`) in their order.
        self.sql_dirs = [Path(sql_dir), *(Path(folder) for folder in extra_sql)]
        #: The day closed days are counted from (UTC, as the landings' days).
        self.clock = clock

    @property
    def copied_streams(self) -> list[Stream]:
        """The product's daily streams: their closed days are tables of the file."""
        return [s for s in self.streams.values() if s.daily]

    def _lake_stream(self, service: str, name: str) -> Stream:
        """A stream the product does not define, as its files in the lake show it."""
        stream = others_stream(service, name)
        files = self.lake.files(stream)
        if not files:
            raise SetupError(self._unlanded(stream))
        daily = any(PurePosixPath(f).parent.name.startswith("date=") for f in files)
        return replace(stream, daily=daily)

    def _unlanded(self, stream: Stream) -> str:
        return (
            f"{{{{ source('{stream.service}', '{stream.name}') }}}} in a view of WAREHOUSE_SQL: "
            f"the product has no such stream and {self.lake.uri(self.lake.stream_dir(stream))} "
            "holds no Parquet file; write one (even empty) before the warehouse is built, "
            "or correct the view"
        )

    def check_sources(self) -> None:
        """Raise `SetupError` where a view reads a source the product does not land and the
        lake holds no file of: no sync or push can build the views until someone writes it,
        so it is said before any work (one listing per such source)."""
        for stream in others_streams(self.sql_dirs, self.streams.values()):
            if not self.lake.files(stream):
                raise SetupError(f"{self._unlanded(stream)}; nothing was pulled or sent")

    def _source(self, plan: _Plan | None, match: re.Match[str]) -> str:
        service, name = match.group(1), match.group(2)
        stream = self.streams.get((service, name)) or self._lake_stream(service, name)
        if plan is not None and stream.relation in plan.listings:
            days = plan.listings[stream.relation]
            open_days = days.open_days(plan.first_open)
            plan.read |= {(stream.relation, day) for day in open_days}
            if days.files:
                return source_of(self.lake, stream, open_days)
        else:
            relation = self.lake.relation(stream)
            if relation is not None:
                if plan is not None:
                    plan.read.add((stream.relation, None))
                if (service, name) not in self.streams:
                    return relation
                # A column declared after the stream's files were written reads as null,
                # not as a view that cannot be built until the next landing.
                declared = _empty_relation(dated(stream) if stream.daily else stream.schema)
                return f"(SELECT * FROM {relation} UNION ALL BY NAME SELECT * FROM {declared})"
        schema = dated(stream) if stream.daily else stream.schema
        return _empty_relation(schema)

    def _sql_files(self) -> list[Path]:
        return sql_files(self.sql_dirs)

    def definitions(self) -> str:
        """A fingerprint of what the views are made from, but the lake's files: the SQL
        files, the declared streams, where the lake is. Read without listing the lake."""
        parts = [self.lake.place.uri, str(OPEN_DAYS)]
        parts += [f"{f}\n{f.read_text()}" for f in self._sql_files()]
        parts += [f"{s.relation} {s.daily} {s.schema}" for s in self.streams.values()]
        parts += [s.relation for s in self.viewed]
        return _fingerprint(parts)

    def _views(self) -> list[tuple[str, str, str]]:
        """Each view as written, in the order it is made: its relation, where it comes from
        (a SQL file, or the declared stream), its SQL with the sources not yet substituted."""
        defined = {(file.parent.name, file.stem) for file in self._sql_files()}
        declared = [s for s in self.viewed if (s.service, s.name) not in defined]
        schemas = schema_order({*schemas_of(self.sql_dirs), *(s.service for s in declared)})
        views = []
        for schema in schemas:
            for stream in declared:
                if stream.service == schema:
                    views.append((stream.relation, stream.relation, declared_view(stream)))
            for sql_dir in self.sql_dirs:
                for file in sorted((sql_dir / schema).glob("*.sql")):
                    views.append((f"{schema}.{file.stem}", str(file), file.read_text()))
        return views

    def statements(self, plan: _Plan | None = None, reading: Iterable[str] = ()) -> list[str]:
        """Every statement that builds the warehouse, in order. With a `plan`, the copied
        streams read their tables and open days, and the plan learns what the views read
        from the lake; without, every stream reads all its files (a warehouse in memory,
        which has no tables). `reading`: queries whose views alone are wanted (with the
        views those read in turn); none, every view."""
        views = self._views()
        if reading:
            wanted = read_by(reading, {relation: sql for relation, _, sql in views})
            views = [view for view in views if view[0] in wanted]
        schemas = schema_order({*schemas_of(self.sql_dirs), *(r.split(".")[0] for r, *_ in views)})
        statements = [f"CREATE SCHEMA IF NOT EXISTS {schema}" for schema in schemas]
        source = functools.partial(self._source, plan)
        statements += [f"{ORIGIN}{origin}\n{SOURCE.sub(source, sql)}" for _, origin, sql in views]
        return statements

    @contextmanager
    def in_memory(self, reading: Iterable[str] = ()) -> Iterator[duckdb.DuckDBPyConnection]:
        """The same views in a DuckDB of this process's own: what the file holds, without
        opening it, so no session on the file can stand in the way (the push reads here).
        `reading`: queries whose views alone are defined (the push's sources): a view binds
        over every file it reads, so defining the others would cost what the lake holds.
        Kept to `PUSH_SETTINGS`' memory."""
        with self.lake.connect(config=PUSH_SETTINGS) as con:
            _define(con, self.statements(reading=reading))
            yield con

    def covers(self, written: Iterable[Written]) -> bool:
        """Whether the file's views already show what a landing wrote, read from the file's
        record alone: its definitions are current, no day has closed since its build, and
        its views read each written open day (or relation) from the lake."""
        built = built_state(self.path)
        if built is None or built.first_open != first_open_day(self.clock()):
            return False
        known = {s.relation for s in self.streams.values()}
        shown = built.read
        if any(rel in known and (rel, day) not in shown for rel, day in written):
            return False
        return built.definitions == self.definitions()

    def refresh(self, written: Iterable[Written] | None = None) -> str | None:
        """Bring the views and the closed days' tables up to date: None if they were, else
        what was done. `written`: what a landing wrote; where the file's record shows its
        views read all of it already, nothing is listed or built (`covers`).

        The new file is built beside the old one and renamed over it, so a session open on
        the old file (read-only or not) neither blocks the build nor sees it half done: it
        keeps reading the old file until it reconnects, and new connections see the new one.
        The new file starts as a copy of the old one when that can be read (its tables,
        someone's or the closed days', come with it). When a read-write session holds it, it
        cannot be read: the new file is built whole, and the replaced file is kept as
        `<name>.previous` (the same file, linked), where that session's writes go. Builds on
        one host take turns, so the last one built from the newest lake.

        Raises `WarehouseBusy` if the old file has changes a read-write session has not
        saved (its `.wal`): replacing the file now would orphan them."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with held(self.path.with_name(f".{self.path.name}{LOCK_SUFFIX}")):
            if written is not None and self.covers(written):
                return None
            self._sweep_killed_builds()
            build = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}")
            mark = held_while_written(build.with_name(build.name + HELD_SUFFIX))
            temporary = build.with_name(build.name + ".tmp")
            try:
                return self._build(temporary)
            finally:
                for leftover in (temporary, _wal(temporary), _link(temporary)):
                    leftover.unlink(missing_ok=True)
                build.with_name(build.name + HELD_SUFFIX).unlink(missing_ok=True)
                os.close(mark)

    def _build(self, temporary: Path) -> str | None:
        plan = _Plan(
            first_open_day(self.clock()),
            {s.relation: Listing.of(self.lake, s) for s in self.copied_streams},
        )
        # Spilled beside the file: the disk a build writes to either way, so a full one is
        # told as WAREHOUSE_PATH's.
        spill = self.path.with_name(f".{self.path.name}{SPILL_SUFFIX}")
        settings = {**BUILD_SETTINGS, "temp_directory": str(spill)}
        with self.lake.connect(config=settings) as builder:
            statements = self.statements(plan)
            fingerprint = _fingerprint(statements)
            readable = self.path.exists() and _attach_old(builder, self.path)
            old = recorded(builder, "replaced") if readable else None
            if (
                old is not None
                and old.fingerprint == fingerprint
                and all(
                    old.copied.get(relation, {}) == listing.closed(plan.first_open)
                    for relation, listing in plan.listings.items()
                )
            ):
                return None
            copied_before = old.copied if old is not None else {}
            same_views = old is not None and old.fingerprint == fingerprint
            if readable and not _wal(self.path).exists():
                # The attachment keeps writers out: the copy is of a file no one changes.
                shutil.copyfile(self.path, temporary)
                builder.execute(f"ATTACH {sql_literal(str(temporary))} AS built")
                builder.execute("USE built")
                if not same_views:
                    _drop_views(builder)
            else:
                same_views = False
                builder.execute(f"ATTACH {sql_literal(str(temporary))} AS built")
                builder.execute("USE built")
                if readable:
                    _carry_tables(builder)
                copied_before = {}
            progress = streams_copied([s.relation for s in self.copied_streams])
            copied = {
                s.relation: copy_closed_days(
                    builder,
                    self.lake,
                    s,
                    plan.listings[s.relation],
                    plan.first_open,
                    copied_before.get(s.relation, {}),
                    progress[s.relation],
                )
                for s in self.copied_streams
            }
            if not same_views:  # else the copy has them: only closed days changed
                _define(builder, statements)
            read = frozenset(plan.read)
            record(builder, Built(fingerprint, self.definitions(), plan.first_open, read, copied))
            builder.execute("CHECKPOINT built")
            builder.execute("USE memory")
            builder.execute("DETACH built")
            return self._replace(temporary, readable)

    def _sweep_killed_builds(self) -> None:
        """Remove what builds killed half way left beside the file. A build holds its
        `.held` file while it lives (`pipelines/lake/held_files.py`), and makes it before any
        other, so files of a build whose `.held` is gone, or no longer held, are leftovers."""
        builds: dict[str, list[Path]] = {}
        for found in self.path.parent.glob(f".{self.path.name}.*"):
            build = found.name.removeprefix(f".{self.path.name}.").split(".")[0]
            builds.setdefault(build, []).append(found)
        for build, files in builds.items():
            held = self.path.with_name(f".{self.path.name}.{build}{HELD_SUFFIX}")
            if any(f.name.endswith(HELD_SUFFIX + ".new") for f in files):
                continue  # a build being born
            if held.exists() and not remove_unless_held(held):
                continue  # a live build beside this one
            for leftover in files:
                leftover.unlink(missing_ok=True)

    def _replace(self, built: Path, readable: bool) -> str:
        """Rename the built file over the old one; called while the old one, if readable,
        is attached read-only, so no read-write session can open it meanwhile."""
        wal = _wal(self.path)
        if readable or not self.path.exists():
            # No session writes to the old file (the attachment's shared lock keeps them
            # out), or there is none: a log beside it is a crashed writer's, already read into
            # the carried tables. Left beside the new file it would stop every connection.
            wal.unlink(missing_ok=True)
        elif wal.exists():
            raise WarehouseBusy(
                f"{self.path} has changes a read-write session has not saved ({wal.name}), so "
                "its views could not be brought up to date; the data is in the lake. Close "
                "that session (its changes are kept), then run `python -m cli warehouse`. "
                f"If no session is open, {wal.name} is a crashed one's: move it away."
            )
        elif self.path.exists():
            previous = self.path.with_name(f"{self.path.name}{PREVIOUS_SUFFIX}")
            # Linked under a temporary name, then renamed: an earlier `.previous` is
            # replaced whole, and a crash leaves no half-made one.
            os.link(self.path, _link(built))
            os.replace(_link(built), previous)
            os.replace(built, self.path)
            return (
                f"views rewritten; the replaced file, open read-write in another session, is "
                f"kept as {previous.name}"
            )
        os.replace(built, self.path)
        return "views rewritten"


def _fingerprint(statements: list[str]) -> str:
    return hashlib.sha256("\n;\n".join(statements).encode()).hexdigest()


def _wal(path: Path) -> Path:
    """DuckDB's write-ahead log of a database file: the file's name plus `.wal`."""
    return path.with_name(f"{path.name}.wal")


def _link(built: Path) -> Path:
    """Where the replaced file is linked before it is renamed to `<name>.previous`."""
    return built.with_name(f"{built.name}.link")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _attach_old(builder: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """Attach the file being replaced read-only, as `replaced`; False if it cannot be read (a
    read-write session in another process holds DuckDB's lock on it)."""
    try:
        builder.execute(f"ATTACH {sql_literal(str(path))} AS replaced (READ_ONLY)")
    except duckdb.Error:
        return False
    return True


def _carry_tables(builder: duckdb.DuckDBPyConnection) -> None:
    """Copy the tables someone made in the old file into the new one: the warehouse's own are
    the closed days' (schema `_lake`), copied anew from the lake."""
    tables = builder.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'replaced' "
        "AND schema_name <> ?",
        [COPIES],
    ).fetchall()
    for schema, table in tables:
        builder.execute(f"CREATE SCHEMA IF NOT EXISTS {_quoted(schema)}")
        name = f"{_quoted(schema)}.{_quoted(table)}"
        builder.execute(f"CREATE TABLE {name} AS FROM replaced.{name}")


def _define(con: duckdb.DuckDBPyConnection, statements: list[str]) -> None:
    """Create the views in `con`'s default database, which holds no view yet. A view that
    DuckDB cannot make (a mistake in its SQL, a column or relation it does not find) is a
    `SetupError` naming its file."""
    for statement in statements:
        try:
            con.execute(statement)
        except VIEW_MISTAKES as mistake:
            origin = statement.partition("\n")[0].removeprefix(ORIGIN)
            cause = first_line(mistake).rstrip("!.")
            raise SetupError(
                f"{origin}: {cause}. Correct the view (`sql/` and the folders WAREHOUSE_SQL "
                "lists); until then the warehouse keeps its views as they were"
            ) from None


def _drop_views(con: duckdb.DuckDBPyConnection) -> None:
    """Drop every view of `con`'s database, and the schemas left empty: a rebuild defines
    the views anew, from the folders as they are now."""
    database = con.execute("SELECT current_database()").fetchone()[0]
    for schema, view in con.execute(
        "SELECT schema_name, view_name FROM duckdb_views() "
        "WHERE database_name = ? AND NOT internal",
        [database],
    ).fetchall():
        con.execute(f"DROP VIEW {_quoted(schema)}.{_quoted(view)}")
    for (schema,) in con.execute(
        "SELECT schema_name FROM duckdb_schemas() WHERE database_name = ? AND NOT internal "
        "AND schema_name NOT IN (SELECT schema_name FROM duckdb_tables() WHERE database_name = ?)",
        [database, database],
    ).fetchall():
        con.execute(f"DROP SCHEMA {_quoted(schema)}")
