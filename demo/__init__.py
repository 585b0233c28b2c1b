"""The demo, apart from the product: a shop (the brand's own system) written to the lake
(`shop.py`), its views and the example outbound views the push sends (`sql/`, laid out like
the product's `sql/`), and the drivers of `make demo` (`__main__.py`) and `make dev`
(`dev.py`).

The product (`pipelines/`, `assets/`) never imports this package. The demo's SQL reaches the
warehouse through `WAREHOUSE_SQL` (pipelines/settings.py), which the drivers, the tests that
push and `bench/push.py` set to `SQL_DIR` (`environment`)."""

from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent / "sql"


def environment() -> dict[str, str]:
    """The setting that adds the demo's SQL to the warehouse."""
    return {"WAREHOUSE_SQL": str(SQL_DIR)}
