"""Adding a stream of an existing kind is its declaration beside its row function and its
entry in a registry (docs/development.md, "Adding a stream"): two streams declared here, in
a registry of their own, have their assets, their checks and their views, and land equal to
the sandbox's truth, with no other file touched. One is a snapshot (the accounts' call under
another name), one a daily stream (the daily stats' call)."""

from dataclasses import replace
from datetime import timedelta

import dagster as dg
import duckdb

from assets.catalog import stream_metadata
from assets.checks import stream_checks
from assets.factory import stream_assets
from assets.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pipelines.lake import Lake
from pipelines.pull.landing import PulledStream, today
from pipelines.registry import WAREHOUSE_STREAMS
from pipelines.settings import load_settings
from pipelines.streams.comment import ACCOUNTS, DAILY_STATS
from pipelines.warehouse import Warehouse
from tests.pipelines.test_comment import workspace_id

#: The two throwaway declarations and their registry; nothing else in the repository knows
#: them.
#: A name longer than the lake's file names: the run history still records its runs.
LONG_NAME = "accounts_again_under_a_name_of_forty_chr"
ACCOUNTS_AGAIN: PulledStream = replace(
    ACCOUNTS, name=LONG_NAME, description="The connected accounts, under a name of its own."
)
STATS_AGAIN: PulledStream = replace(
    DAILY_STATS, name="stats_again", description="The daily figures, under a name of their own."
)
REGISTRY = [ACCOUNTS_AGAIN, STATS_AGAIN]


def test_a_stream_declared_in_a_registry_of_its_own_lands_with_its_asset_checks_and_view(
    frozen_sandbox, sync_env, tmp_path
):
    resources = sync_env(frozen_sandbox)
    assets = stream_assets(REGISTRY)
    checks = stream_checks(REGISTRY)
    # The assets and their catalog entries follow from the declarations.
    assert {name: a.key.path for name, a in assets.items()} == {
        LONG_NAME: ["comment", LONG_NAME],
        "stats_again": ["comment", "stats_again"],
    }
    assert assets["stats_again"].partitions_def is not None
    assert assets[LONG_NAME].partitions_def is None
    columns = stream_metadata(ACCOUNTS_AGAIN)["dagster/column_schema"].columns
    assert [c.name for c in columns] == ACCOUNTS.schema.names

    last = today()
    first = last - timedelta(days=6)
    result = dg.materialize(
        [*assets.values(), *checks],
        resources=resources,
        tags={
            ASSET_PARTITION_RANGE_START_TAG: first.isoformat(),
            ASSET_PARTITION_RANGE_END_TAG: last.isoformat(),
        },
        selection=[assets["stats_again"].key],
    )
    snapshot = dg.materialize(
        [*assets.values(), *checks], resources=resources, selection=[assets[LONG_NAME].key]
    )
    # Its generic checks ran on each and passed.
    evaluations = [*result.get_asset_check_evaluations(), *snapshot.get_asset_check_evaluations()]
    ran = {(e.asset_key.path[1], e.check_name) for e in evaluations}
    for name in (LONG_NAME, "stats_again"):
        assert {(name, "ids_unique"), (name, "schema_matches"), (name, "files_readable")} <= ran
    assert all(e.passed for e in evaluations), [e for e in evaluations if not e.passed]

    # Its view, in a warehouse of the product's streams and the registry's, equals the
    # truth of the call it makes.
    settings = load_settings()
    warehouse = tmp_path / "registry.duckdb"
    streams = [*WAREHOUSE_STREAMS, *REGISTRY]
    Warehouse(warehouse, Lake(settings.lake_root), streams, extra_sql=[], viewed=REGISTRY).refresh()
    scope = workspace_id(frozen_sandbox)
    days = frozen_sandbox.truth_days("comment", scope, "trigger_logs")
    with duckdb.connect(str(warehouse), read_only=True) as con:
        ids = [row[0] for row in con.execute(f"SELECT id FROM comment.{LONG_NAME}").fetchall()]
        recorded = con.execute(
            "SELECT relation, outcome FROM sync.runs WHERE relation = ?",
            [f"comment.{LONG_NAME}"],
        ).fetchall()
        stats = con.execute(
            "SELECT date, public_replies + dms + failed FROM comment.stats_again ORDER BY date"
        ).fetchall()
    assert sorted(ids) == sorted(frozen_sandbox.truth_ids("comment", scope, "accounts"))
    assert recorded == [(f"comment.{LONG_NAME}", "succeeded")]
    assert len(stats) == 7 and {str(day): n for day, n in stats} == {
        str(day): days[str(day)] for day, _ in stats
    }
