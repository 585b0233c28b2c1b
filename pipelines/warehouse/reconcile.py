"""Compare the warehouse with a sandbox's ground truth (`/_sandbox/truth`): the demo's table
and the tests' oracle. Truth is counted per scope: a comment automation workspace id, or a
region, which is the connection name for the other two services."""

from dataclasses import dataclass

import duckdb

from pipelines.lake import Lake
from pipelines.stream import Stream


@dataclass(frozen=True)
class Reconciled:
    relation: str
    rows: int
    truth: int | None

    @property
    def equal(self) -> bool:
        return self.truth is not None and self.rows == self.truth


def _scopes(con: duckdb.DuckDBPyConnection, stream: Stream) -> dict[str, str]:
    """Connection name to truth scope."""
    if stream.service == "comment":
        return dict(con.execute("SELECT connection, id FROM comment.workspace").fetchall())
    rows = con.execute(f"SELECT DISTINCT connection FROM {stream.relation}").fetchall()
    return {name: name for (name,) in rows}


def reconcile(
    lake: Lake, warehouse_path: str, streams: list[Stream], truth: dict
) -> list[Reconciled]:
    """Each stream's rows in the warehouse (whose views read `lake`) beside the truth's."""
    results = []
    with lake.connect(warehouse_path, read_only=True) as con:
        for stream in streams:
            per_connection = dict(
                con.execute(
                    f"SELECT connection, count(*) FROM {stream.relation} GROUP BY ALL"
                ).fetchall()
            )
            scopes = _scopes(con, stream)
            expected = [
                truth.get(stream.service, {}).get(scope, {}).get(stream.name)
                for scope in scopes.values()
            ]
            known = None if not expected or None in expected else sum(expected)
            results.append(Reconciled(stream.relation, sum(per_connection.values()), known))
    return results
