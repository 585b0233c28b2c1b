"""The warehouse's SQL folders: `sql/` and the ones `WAREHOUSE_SQL` lists
(pipelines/warehouse.py, pipelines/settings.py)."""

import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from pipelines.catalog import WAREHOUSE_STREAMS
from pipelines.lake import Lake, Stream
from pipelines.settings import load_settings
from pipelines.warehouse import SQL_DIR, Warehouse, schema_order

ERP_ORDERS = Stream("erp", "orders", pa.schema([("id", pa.string()), ("total", pa.float64())]))


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
    with pytest.raises(FileNotFoundError, match="WAREHOUSE_SQL"):
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
    with pytest.raises(ValueError, match=r"source\('erp', 'orders'\).*no Parquet file"):
        warehouse.statements()
