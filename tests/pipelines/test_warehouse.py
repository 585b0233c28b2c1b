"""The warehouse's SQL folders: `sql/` and the ones `WAREHOUSE_SQL` lists
(pipelines/warehouse/__init__.py, pipelines/settings.py), and its rebuild beside the file
analysts have open."""

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from pipelines.errors import SetupError
from pipelines.lake import Lake
from pipelines.pull.landing import PulledStream
from pipelines.registry import WAREHOUSE_STREAMS
from pipelines.settings import load_settings
from pipelines.stream import Stream, connection_schema
from pipelines.streams.conversation import CHANNELS
from pipelines.warehouse import LOCK_SUFFIX, SQL_DIR, Warehouse, WarehouseBusy, schema_order
from pipelines.warehouse.relations import refresh_warehouse

ERP_ORDERS = Stream("erp", "orders", pa.schema([("id", pa.string()), ("total", pa.float64())]))
#: An analyst's DuckDB session in a process of its own (DuckDB's locks are per process): it
#: runs each statement it reads on a line and answers with the rows' repr on a line.
SESSION = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "read-only")
for statement in sys.stdin:
    print(repr(con.execute(statement).fetchall()), flush=True)
"""


@contextmanager
def held_session(path: Path, read_only: bool, *statements: str) -> Iterator[Callable[[str], str]]:
    """A session open on `path` until the block ends, after running `statements`; yields a
    function that runs one more statement in it and returns its answer."""
    mode = "read-only" if read_only else "read-write"
    session = subprocess.Popen(
        [sys.executable, "-c", SESSION, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def run(statement: str) -> str:
        session.stdin.write(statement + "\n")
        session.stdin.flush()
        answer = session.stdout.readline().strip()
        assert answer, f"the {mode} session failed on: {statement}"
        return answer

    try:
        for statement in [*statements, "SELECT 1"]:
            run(statement)
        yield run
    finally:
        session.stdin.close()  # the session ends as an analyst's does: closed, not killed
        session.wait(timeout=30)


def channels(path: Path) -> int:
    """Rows of conversation.channels in a new connection to `path`."""
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT count(*) FROM conversation.channels").fetchone()[0]


def land_first_channel(lake: Lake) -> None:
    lake.write(CHANNELS, "default", [{"connection": "default", "id": 1}])


def views(path: Path) -> set[str]:
    with duckdb.connect(str(path), read_only=True) as con:
        found = con.execute(
            "SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
    return {name for (name,) in found}


def user_folder(root: Path) -> Path:
    """A user's folder: a source of their own (landed by them) and an outbound view over it."""
    (root / "erp").mkdir(parents=True)
    (root / "outbound").mkdir()
    (root / "erp" / "orders.sql").write_text(
        "CREATE OR REPLACE VIEW erp.orders AS SELECT * FROM {{ source('erp', 'orders') }};"
    )
    (root / "outbound" / "orders.sql").write_text(
        "CREATE OR REPLACE VIEW outbound.orders AS SELECT id, total FROM erp.orders;"
    )
    return root


def test_sources_come_first_by_name_then_sync_outbound_and_marts():
    found = ["marts", "outbound", "shop", "sync", "datahub", "comment", "erp", "conversation"]
    assert schema_order(found) == [
        *("comment", "conversation", "datahub", "erp", "shop"),
        *("sync", "outbound", "marts"),
    ]


def test_the_setting_is_a_list_of_existing_folders(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    env = {"WAREHOUSE_SQL": f"{first}{os.pathsep}{second}", "SYNC_CONFIG": os.devnull}
    assert load_settings(env).warehouse_sql == (first, second)
    assert load_settings({"SYNC_CONFIG": os.devnull}).warehouse_sql == ()
    with pytest.raises(SetupError, match="WAREHOUSE_SQL names .*which are not folders"):
        load_settings({"WAREHOUSE_SQL": str(tmp_path / "missing"), "SYNC_CONFIG": os.devnull})


def test_an_extra_folder_adds_its_schemas_and_leaving_it_out_removes_them(tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.write(ERP_ORDERS, "erp", [{"id": "O-1", "total": 12.5}])
    extra = user_folder(tmp_path / "mine")
    path = tmp_path / "warehouse.duckdb"
    product = Warehouse(path, lake, WAREHOUSE_STREAMS)
    assert "CREATE SCHEMA IF NOT EXISTS outbound" not in product.statements()

    Warehouse(path, lake, WAREHOUSE_STREAMS, extra_sql=[extra]).refresh()
    assert {"erp.orders", "outbound.orders"} <= views(path)
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT * FROM outbound.orders").fetchall() == [("O-1", 12.5)]

    assert product.refresh()
    assert not {v for v in views(path) if v.startswith(("erp.", "outbound."))}
    assert any(v.startswith("marts.") for v in views(path))


def test_a_rewrite_keeps_a_table_someone_made_in_a_schema_it_no_longer_defines(tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.write(ERP_ORDERS, "erp", [{"id": "O-1", "total": 12.5}])
    path = tmp_path / "warehouse.duckdb"
    Warehouse(path, lake, WAREHOUSE_STREAMS, extra_sql=[user_folder(tmp_path / "mine")]).refresh()
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE erp.notes AS SELECT 'kept' AS note")

    assert Warehouse(path, lake, WAREHOUSE_STREAMS).refresh()

    assert "erp.orders" not in views(path)
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT note FROM erp.notes").fetchall() == [("kept",)]


def test_a_source_nobody_defines_or_landed_is_named(tmp_path):
    extra = user_folder(tmp_path / "mine")
    warehouse = Warehouse(
        tmp_path / "w.duckdb", Lake(tmp_path / "lake"), WAREHOUSE_STREAMS, SQL_DIR, [extra]
    )
    with pytest.raises(SetupError, match=r"source\('erp', 'orders'\).*no Parquet file"):
        warehouse.statements()


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "read-write"])
def test_a_streams_first_file_shows_in_new_connections_while_a_session_holds_the_file(
    tmp_path, read_only
):
    """Regression: the rewrite a stream's first file needs (its view was a typed empty
    relation) waited for DuckDB's lock, gave up, and the refresh returned as if done: the
    view stayed empty behind a green light."""
    lake = Lake(tmp_path / "lake")
    path = tmp_path / "warehouse.duckdb"
    refresh_warehouse(lake.root, path, ())
    with held_session(path, read_only) as analyst:
        assert analyst("SELECT count(*) FROM conversation.channels") == "[(0,)]"
        land_first_channel(lake)

        outcome = refresh_warehouse(lake.root, path, ())

        assert outcome.startswith(f"{path} (views rewritten")
        assert channels(path) == 1
        # the open session keeps the file it opened, unbroken, until it reconnects
        assert analyst("SELECT count(*) FROM conversation.channels") == "[(0,)]"
    assert refresh_warehouse(lake.root, path, ()) == f"{path} (views up to date)"
    left = [f for f in tmp_path.glob(".*") if not f.name.endswith(LOCK_SUFFIX)]
    assert not left, "the build left a temporary file"


def test_a_read_write_session_is_moved_to_the_previous_file_with_what_it_writes(tmp_path):
    lake = Lake(tmp_path / "lake")
    path = tmp_path / "warehouse.duckdb"
    refresh_warehouse(lake.root, path, ())
    saved_table = ("CREATE TABLE main.notes AS SELECT 'before' AS note", "CHECKPOINT")
    with held_session(path, False, *saved_table) as analyst:
        land_first_channel(lake)
        outcome = refresh_warehouse(lake.root, path, ())
        analyst("INSERT INTO main.notes VALUES ('after')")

    assert "kept as warehouse.duckdb.previous" in outcome
    with duckdb.connect(str(tmp_path / "warehouse.duckdb.previous"), read_only=True) as con:
        assert con.execute("SELECT note FROM notes ORDER BY 1").fetchall() == [
            ("after",),
            ("before",),
        ]
    assert channels(path) == 1


def test_unsaved_changes_of_a_read_write_session_fail_the_refresh_saying_what_to_do(tmp_path):
    """Replacing the file under them would orphan them; after the session closes, the next
    refresh carries its table into the rebuilt file."""
    lake = Lake(tmp_path / "lake")
    path = tmp_path / "warehouse.duckdb"
    refresh_warehouse(lake.root, path, ())
    with held_session(path, False, "CREATE TABLE main.notes AS SELECT 'mine' AS note"):
        land_first_channel(lake)
        with pytest.raises(WarehouseBusy, match=r"Close that session.*cli warehouse"):
            refresh_warehouse(lake.root, path, ())

    assert refresh_warehouse(lake.root, path, ()) == f"{path} (views rewritten)"
    assert channels(path) == 1
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT note FROM notes").fetchall() == [("mine",)]


def test_a_pulled_stream_without_a_sql_file_gets_a_typed_view_from_its_declaration(tmp_path):
    """Adding a stream needs no SQL: its view lists the declared columns (a daily stream's
    `date` after `connection`) with `_extra` as JSON, empty and typed before its first file;
    a SQL file of the same name replaces it."""
    events = PulledStream(
        "svc",
        "events",
        connection_schema([("id", pa.int64()), ("kind", pa.string())]),
        daily=True,
        rows=list,
    )
    lake, path = Lake(tmp_path / "lake"), tmp_path / "warehouse.duckdb"
    sql = tmp_path / "sql"
    sql.mkdir()

    def build() -> list[tuple]:
        Warehouse(path, lake, [events], sql_dir=sql, viewed=[events]).refresh()
        with duckdb.connect(str(path), read_only=True) as con:
            described = con.execute("DESCRIBE svc.events").fetchall()
            return [(name, kind) for name, kind, *_ in described]

    typed = [
        ("connection", "VARCHAR"),
        ("date", "DATE"),
        ("id", "BIGINT"),
        ("kind", "VARCHAR"),
        ("_extra", "JSON"),
    ]
    assert build() == typed  # before any file: empty, typed
    row = {"connection": "a", "id": 1, "kind": "open", "_extra": '{"new": {"x": 1}}'}
    lake.write(events, "a", [row], day=date(2026, 10, 1))
    assert build() == typed
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT id, _extra->>'$.new.x' FROM svc.events").fetchall() == [(1, "1")]
    (sql / "svc").mkdir()
    (sql / "svc" / "events.sql").write_text(
        "CREATE OR REPLACE VIEW svc.events AS SELECT id FROM {{ source('svc', 'events') }};"
    )
    assert build() == [("id", "BIGINT")]


def test_a_column_declared_after_the_files_were_written_reads_as_null(tmp_path):
    """A snapshot stream's files written before a column was declared (`looked_up_at` of
    conversation.members, an upgrade of the product): the views build, the column null, the
    rows there, without waiting for the next landing to rewrite them."""
    from pipelines.streams.conversation.members import MEMBERS

    lake = Lake(tmp_path / "lake")
    older = pa.schema([f for f in MEMBERS.schema if f.name != "looked_up_at"])
    row = {name: None for name in older.names} | {"id": 7, "connection": "default"}
    lake.put(lake.path(MEMBERS, "default"), pa.Table.from_pylist([row], schema=older))
    refresh_warehouse(str(tmp_path / "lake"), tmp_path / "warehouse.duckdb", [])
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        found = con.execute("SELECT id, looked_up_at FROM conversation.members").fetchall()
    assert found == [(7, None)]


def test_a_warehouse_in_memory_for_some_queries_defines_what_they_read_and_no_more(tmp_path):
    """The push's warehouse (`Warehouse.in_memory(reading)`): the views its queries name, with
    those these read in turn (quoted, or behind the database's name); a view nobody asked for
    is not defined, so even one that cannot be built stands in no one's way."""
    lake = Lake(tmp_path / "lake")
    lake.write(ERP_ORDERS, "orders", [{"id": "o-1", "total": 5.0}])
    folder = user_folder(tmp_path / "mine")
    (folder / "outbound" / "refunds.sql").write_text(
        'CREATE OR REPLACE VIEW outbound.refunds AS SELECT id FROM memory."erp" . "orders";'
    )
    (folder / "outbound" / "broken.sql").write_text(
        "CREATE OR REPLACE VIEW outbound.broken AS SELECT * FROM erp.nowhere;"
    )
    warehouse = Warehouse(tmp_path / "w.duckdb", lake, WAREHOUSE_STREAMS, extra_sql=[folder])
    with warehouse.in_memory(["SELECT * FROM OUTBOUND.refunds"]) as con:
        defined = con.execute(
            "SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
        assert {name for (name,) in defined} == {"outbound.refunds", "erp.orders"}
        assert con.execute("SELECT * FROM outbound.refunds").fetchall() == [("o-1",)]
    with pytest.raises(SetupError, match="broken.sql"), warehouse.in_memory():
        pass
