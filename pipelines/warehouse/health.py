"""Whether a connection is failing, and when it last landed and failed, is decided once: by
the view `sync.connection_health` (`sql/sync/connection_health.sql`). The warehouse runs it
over every run the lake recorded; `connection_health` runs the same SQL over the runs a
caller holds (the Dagster asset's table carried from run to run, and its run), so the
analyst's view and the UI cannot tell a connection's health apart."""

from collections.abc import Iterable

import duckdb
import pyarrow as pa

from pipelines.warehouse import SOURCE, SQL_DIR

VIEW = SQL_DIR / "sync" / "connection_health.sql"
#: The columns of `sync.runs` the view reads.
RUNS = pa.schema(
    [
        ("relation", pa.string()),
        ("ended_at", pa.timestamp("us", tz="UTC")),
        (
            "connections",
            pa.list_(
                pa.struct(
                    [
                        ("connection", pa.string()),
                        ("outcome", pa.string()),
                        ("rows", pa.int64()),
                        ("error", pa.string()),
                    ]
                )
            ),
        ),
    ]
)


def connection_health(runs: Iterable[dict]) -> list[dict]:
    """The view's rows over `runs` (each with the `relation`, `ended_at` and `connections` of
    a row of `sync.runs`), by relation and connection; its times in UTC."""
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        con.register("runs", pa.Table.from_pylist(list(runs), schema=RUNS))
        con.execute("CREATE SCHEMA sync")
        con.execute(SOURCE.sub("runs", VIEW.read_text()))
        found = con.sql("SELECT * FROM sync.connection_health ORDER BY relation, connection")
        return found.to_arrow_table().to_pylist()
