"""Adding a stream of an existing kind is its declaration beside its row function and its
entry in a registry (docs/development.md, "Adding a stream"): two streams declared here, in
a registry of their own, have their assets, their checks and their views, and land equal to
the sandbox's truth, with no other file touched. One is a snapshot (the accounts' call under
another name), one a daily stream (the daily stats' call). Then, in a copy of the repository,
a stream more of the conversation service and of the data hub, each entered in its service's
`STREAMS`: every list that reads the registry has it, and it lands equal to the truth."""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

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


#: Appended to a copy of the repository: one stream more of the conversation service and one
#: of the data hub, each declared (a copy of a stream under another name) and entered in its
#: service's `STREAMS`, as docs/development.md says. Nothing else in the copy is edited.
ADDED = {
    "conversation": ("CHANNELS", "channels_again", "channels"),
    "datahub": ("CUSTOM_FIELDS", "fields_again", "custom_fields"),
}

#: Run in the copy: every list a user or a tool reads, then a sync of the two streams alone.
IN_THE_COPY = """
import json, sys
from pathlib import Path

import duckdb

from assets.definitions import defs
from cli.main import main
from pipelines.registry import PULLED
from tests import test_docs

seen = {"registry": [s.relation for s in PULLED]}
try:
    main(["sync", "--help"])
except SystemExit:
    pass
seen["assets"] = ["/".join(key.path) for key in defs.resolve_all_asset_keys()]
try:
    test_docs.test_readme_names_every_relation_the_warehouse_has(Path(sys.argv[1]))
    seen["readme_check"] = "passed"
except AssertionError as failed:
    seen["readme_check"] = str(failed)
seen["exit"] = main(["sync", "--streams", *sys.argv[3:]])
with duckdb.connect(sys.argv[2], read_only=True) as con:
    views = con.sql("SELECT schema_name, view_name FROM duckdb_views()").fetchall()
    seen["views"] = [f"{schema}.{view}" for schema, view in views]
print("SEEN " + json.dumps(seen))
"""


def test_a_conversation_and_a_data_hub_stream_added_to_a_copy_are_in_every_list_and_land_the_truth(
    frozen_sandbox, tmp_path
):
    copy = tmp_path / "repo"
    root = Path(__file__).resolve().parents[2]
    for part in ("pipelines", "assets", "cli", "sql", "tests"):
        # The bytecode too (its sources keep their times): the copy does not compile anew.
        shutil.copytree(root / part, copy / part, ignore=shutil.ignore_patterns("*.duckdb"))
    for part in ("README.md", "pyproject.toml", "workspace.yaml"):
        shutil.copy2(root / part, copy / part)
    for service, (original, name, _) in ADDED.items():
        declarations = copy / "pipelines" / "streams" / service / "__init__.py"
        declarations.write_text(
            declarations.read_text()
            + f"\nfrom dataclasses import replace\n\nSTREAMS.append(replace({original}, "
            f'name="{name}", description="{original} under a name of its own."))\n'
        )
    relations = [f"{service}.{name}" for service, (_, name, _) in ADDED.items()]
    environment = frozen_sandbox.environment(tmp_path)
    (tmp_path / "sync.toml").write_text(
        "".join(f"[service.{s}]\npace = false\n" for s in ("comment", *ADDED))
    )
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            IN_THE_COPY,
            str(tmp_path / "readme"),
            environment["WAREHOUSE_PATH"],
            *relations,
        ],
        cwd=copy,
        env={**os.environ, **environment, "PYTHONPATH": str(copy)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    help_text, seen_line = ran.stdout.split("SEEN ")
    seen = json.loads(seen_line)
    for relation in relations:
        assert relation in seen["registry"], seen["registry"]
        assert relation in help_text, help_text
        assert relation.replace(".", "/") in seen["assets"], seen["assets"]
        assert relation in seen["views"], seen["views"]
    # README's table is checked against the warehouse: the new relations fail that check,
    # named, until the table lists them.
    assert all(relation in seen["readme_check"] for relation in relations), seen
    assert seen["exit"] == 0
    with duckdb.connect(environment["WAREHOUSE_PATH"], read_only=True) as con:
        for service, (_, name, truth_of) in ADDED.items():
            for region in ("default", "jp"):
                landed = con.execute(
                    f"SELECT id FROM {service}.{name} WHERE connection = ?", [region]
                ).fetchall()
                truth = frozen_sandbox.truth_ids(service, region, truth_of)
                assert truth and sorted(row[0] for row in landed) == sorted(truth), (
                    service,
                    region,
                )
