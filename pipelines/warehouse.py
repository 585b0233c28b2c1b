"""`warehouse.duckdb`: views over the lake, defined by the SQL files in `sql/`.

Pipeline steps only write Parquet (ARCHITECTURE.md, "Warehouse"). The views read the lake's
files when queried, so new partitions show up without touching the warehouse file; it is
rewritten only when a definition changes (a new SQL file, or a stream's first file), which
keeps DuckDB's single-writer lock out of every sync's way.

A SQL file refers to a stream as `{{ source('service', 'stream') }}`; that becomes a
`read_parquet` over the stream's files, or a typed empty relation while it has none.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pyarrow as pa

from pipelines.lake import Lake, Stream

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
#: Schemas in the order they are built: `outbound` reads the services' and `shop`, `marts`
#: reads them all.
SCHEMAS = ("comment", "conversation", "datahub", "shop", "sync", "outbound", "marts")
SOURCE = re.compile(r"\{\{\s*source\('(\w+)',\s*'(\w+)'\)\s*\}\}")


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
        self, path: str | Path, lake: Lake, streams: Iterable[Stream], sql_dir: Path = SQL_DIR
    ) -> None:
        self.path = Path(path)
        self.lake = lake
        self.streams = {(s.service, s.name): s for s in streams}
        self.sql_dir = sql_dir

    def _source(self, match: re.Match[str]) -> str:
        stream = self.streams[(match.group(1), match.group(2))]
        relation = self.lake.relation(stream)
        if relation is not None:
            return relation
        schema = stream.schema
        if stream.daily:
            schema = schema.append(pa.field("date", pa.date32()))
        return _empty_relation(schema)

    def statements(self) -> list[str]:
        """Every statement that builds the warehouse, in order."""
        statements = [f"CREATE SCHEMA IF NOT EXISTS {schema}" for schema in SCHEMAS]
        for schema in SCHEMAS:
            for file in sorted((self.sql_dir / schema).glob("*.sql")):
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
            for statement in statements:
                con.execute(statement)
            con.execute(
                "CREATE OR REPLACE VIEW sync.warehouse_version AS "
                f"SELECT {_literal(fingerprint)} AS fingerprint"
            )
            con.execute("COMMIT")
        return True
