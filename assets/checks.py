"""Asset checks that every stream shares, read from the lake with an in-memory DuckDB (never
the warehouse file, so a check never waits on its lock)."""

import dagster as dg

from assets.resources import LakeResource
from pipelines.lake import Stream


def nothing_compared(reason: str, metadata: dict | None = None) -> dg.AssetCheckResult:
    """The result of a check that found nothing to compare: not a pass (a green check must
    have looked at something), but a warning, as nothing is known to be wrong either."""
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"nothing compared: {reason}",
        metadata={"nothing_compared": reason, **(metadata or {})},
    )


def unique_ids_check(stream: Stream, asset_key: dg.AssetKey) -> dg.AssetChecksDefinition:
    """No key repeats within a connection (`stream.key` may include a daily stream's `date`)."""
    key = ", ".join(["connection", *stream.key])

    @dg.asset_check(
        asset=asset_key,
        name="ids_unique",
        blocking=False,
        description=f"No ({key}) repeats across every landed file of {stream.relation}.",
    )
    def ids_unique(lake: LakeResource) -> dg.AssetCheckResult:
        store = lake.lake()
        relation = store.relation(stream)
        if relation is None:
            return nothing_compared(f"{stream.relation} not landed")
        # Keys counted by their 64-bit hash: a repeated key always hashes alike, so none is
        # missed, and the table is a third of the keys' (a year of trigger logs checks in
        # 16 MB). Two keys sharing a hash (about 1e-8 for a million) look repeated: an
        # exact count then decides.
        [(rows, distinct)] = store.query(
            f"SELECT count(*), count(DISTINCT hash({key})) FROM {relation}", spill=True
        )
        if distinct < rows:
            [(rows, distinct)] = store.query(
                f"SELECT count(*), count(DISTINCT ({key})) FROM {relation}", spill=True
            )
        return dg.AssetCheckResult(
            passed=rows == distinct,
            metadata={"rows": rows, "distinct_keys": distinct, "repeated": rows - distinct},
        )

    return ids_unique
