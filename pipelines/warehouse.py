"""`warehouse.duckdb`: views over the lake, defined by the SQL files in `sql/` and in the
folders `WAREHOUSE_SQL` lists (pipelines/settings.py).

Pipeline steps only write Parquet (README.md, "How data flows"). The views read the lake's
files when queried, so new partitions show up without touching the warehouse file; it is
rewritten only when a definition changes (a new SQL file, or a stream's first file), which
keeps DuckDB's single-writer lock out of every sync's way.

A SQL file refers to a stream as `{{ source('service', 'stream') }}`; that becomes a
`read_parquet` over the stream's files, or a typed empty relation while it has none.

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

import hashlib
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import duckdb
import pyarrow as pa

from pipelines.lake import Lake, Stream

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
#: The schemas built after all others, in this order: `sync` (the push's ledger), `outbound`
#: (what the push sends: reads the sources and the ledger), `marts` (reads them all). Every
#: other schema is a source (a service's streams, a user's own tables) and comes first.
LAST_SCHEMAS = ("sync", "outbound", "marts")
SOURCE = re.compile(r"\{\{\s*source\('(\w+)',\s*'(\w+)'\)\s*\}\}")


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


class WarehouseBusy(Exception):
    """Another process holds the warehouse for writing; the lake is unaffected."""


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _empty_relation(schema: pa.Schema) -> str:
    con = duckdb.connect()
    empty = schema.empty_table()  # noqa: F841 - read by the query below
    types = con.execute("DESCRIBE SELECT * FROM empty").fetchall()
    columns = ", ".join(f'CAST(NULL AS {kind}) AS "{name}"' for name, kind, *_ in types)
    return f"(SELECT {columns} LIMIT 0)"


class Warehouse:
    def __init__(
        self,
        path: str | Path,
        lake: Lake,
        streams: Iterable[Stream],
        sql_dir: Path = SQL_DIR,
        extra_sql: Sequence[str | Path] = (),
    ) -> None:
        self.path = Path(path)
        self.lake = lake
        self.streams = {(s.service, s.name): s for s in streams}
        #: The product's folder first, then the extra ones (`WAREHOUSE_SQL`) in their order.
        self.sql_dirs = [Path(sql_dir), *(Path(folder) for folder in extra_sql)]

    def _lake_stream(self, service: str, name: str) -> Stream:
        """A stream the product does not define, as its files in the lake show it."""
        stream = Stream(service, name, pa.schema([]))
        folder = self.lake.stream_dir(stream)
        if not self.lake.files(stream):
            raise ValueError(
                f"{{{{ source('{service}', '{name}') }}}}: the product has no such stream and "
                f"{folder} holds no Parquet file; write one (even empty) before the warehouse "
                "is built"
            )
        return Stream(service, name, stream.schema, daily=any(folder.glob("date=*")))

    def _source(self, match: re.Match[str]) -> str:
        service, name = match.group(1), match.group(2)
        stream = self.streams.get((service, name)) or self._lake_stream(service, name)
        relation = self.lake.relation(stream)
        if relation is not None:
            return relation
        schema = stream.schema
        if stream.daily:
            schema = schema.append(pa.field("date", pa.date32()))
        return _empty_relation(schema)

    def statements(self) -> list[str]:
        """Every statement that builds the warehouse, in order."""
        schemas = schemas_of(self.sql_dirs)
        statements = [f"CREATE SCHEMA IF NOT EXISTS {schema}" for schema in schemas]
        for schema in schemas:
            for sql_dir in self.sql_dirs:
                for file in sorted((sql_dir / schema).glob("*.sql")):
                    statements.append(SOURCE.sub(self._source, file.read_text()))
        return statements

    def _current_fingerprint(self) -> str | None:
        if not self.path.exists():
            return None
        try:
            with duckdb.connect(str(self.path), read_only=True) as con:
                return con.execute("SELECT fingerprint FROM sync.warehouse_version").fetchone()[0]
        except duckdb.Error:
            return None

    def refresh(self, wait_seconds: float = 3.0) -> bool:
        """Bring the views up to date; True if the file had to be rewritten."""
        statements = self.statements()
        fingerprint = hashlib.sha256("\n;\n".join(statements).encode()).hexdigest()
        if self._current_fingerprint() == fingerprint:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                con = duckdb.connect(str(self.path))
                break
            except duckdb.IOException as exc:
                if time.monotonic() > deadline:
                    raise WarehouseBusy(
                        f"{self.path} is open in another process, so its view definitions "
                        "could not be updated; the data is in the lake. Close other sessions "
                        "and run `python -m pipelines warehouse`."
                    ) from exc
                time.sleep(0.2)
        with con:
            con.execute("BEGIN")
            # A view whose SQL file is gone (or whose folder left WAREHOUSE_SQL) goes too: the
            # warehouse holds exactly what the folders define. The file holds only views.
            for schema, view in con.execute(
                "SELECT schema_name, view_name FROM duckdb_views() "
                "WHERE NOT internal AND database_name = current_database()"
            ).fetchall():
                con.execute(f'DROP VIEW "{schema}"."{view}"')
            # A schema left empty goes with its views; one holding a table someone made there
            # stays (DuckDB would refuse to drop it, and the table is not ours to remove).
            for (schema,) in con.execute(
                "SELECT schema_name FROM duckdb_schemas() WHERE NOT internal "
                "AND database_name = current_database() AND schema_name <> 'main' "
                "AND schema_name NOT IN (SELECT schema_name FROM duckdb_tables() "
                "WHERE database_name = current_database())"
            ).fetchall():
                con.execute(f'DROP SCHEMA "{schema}"')
            for statement in statements:
                con.execute(statement)
            con.execute("CREATE SCHEMA IF NOT EXISTS sync")  # also where no folder defines it
            con.execute(
                "CREATE OR REPLACE VIEW sync.warehouse_version AS "
                f"SELECT {_literal(fingerprint)} AS fingerprint"
            )
            con.execute("COMMIT")
        return True
