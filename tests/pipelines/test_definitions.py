"""The Dagster code location: everything loads, in-process and through the real webserver's
GraphQL API on `workspace.yaml`: all assets, checks, jobs and schedules load, and the catalog
shows every asset's columns and the push's lineage."""

import os
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import dagster as dg
import httpx
import pytest

from assets import definitions, push
from assets.definitions import defs
from assets.factory import owners
from assets.partitions import daily
from pipelines.errors import SetupError
from pipelines.registry import PULLED

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("comment", "conversation", "datahub")
#: What the declarations (pipelines/warehouse/relations.py) say the code location holds.
STREAMS = {service: [s.name for s in PULLED if s.service == service] for service in SERVICES}
DAILY = {f"{s.service}/{s.name}" for s in PULLED if s.partitioned}
HOURLY = {f"{s.service}/{s.name}" for s in PULLED if s.hourly}
JOBS = {
    *(f"{service}_{kind}" for service in SERVICES for kind in ("dimensions", "daily")),
    "all_dimensions",
    "all_daily",
    "push",
    "push_dry_run",
    "resend_rejected",
    "datahub_webhooks",
    "conversation_agent",
    "check_setup",
    "activities",
    "whole_stream_checks",
}
SCHEDULES = {
    "comment_daily_hourly",
    "conversation_daily_hourly",
    "datahub_daily_schedule",
    "all_dimensions_daily",
    "whole_stream_checks_daily",
}
#: The push's record types and the outbound view each is read from (docs/push.md).
PUSHED = {
    "member_import": "member_imports",
    "contact_profile": "contact_profiles",
    "coupon": "coupons",
    "order": "orders",
    "order_fulfillment": "order_fulfillments",
    "membership_tier": "membership_tiers",
    "point": "points",
    "reservation": "reservations",
    "behavior_event": "behavior_events",
    "conversation_assignment": "conversation_assignments",
    "conversation_close": "conversation_closes",
}


def records_of(record_type: str) -> str:
    """The asset of what the record type's service received."""
    service = "conversation" if record_type.startswith("conversation_") else "datahub"
    return f"{service}/records/{record_type}"


#: The push's lineage: warehouse views -> outbound view -> the service's records.
PUSH_LINEAGE = {
    **{f"outbound/{view}": {"warehouse/views"} for view in PUSHED.values()},
    **{records_of(t): {f"outbound/{view}"} for t, view in PUSHED.items()},
}
STARTUP_SECONDS = 90


def key_strings(keys) -> set[str]:
    return {key.to_user_string() for key in keys}


def check_strings(keys) -> set[str]:
    return {f"{key.asset_key.to_user_string()}:{key.name}" for key in keys}


def defs_view() -> dict[str, set[str]]:
    """What `defs` holds, in the shape the GraphQL answer is reduced to below."""
    graph = defs.resolve_asset_graph()
    repository = defs.get_repository_def()
    return {
        "assets": key_strings(graph.get_all_asset_keys()),
        "checks": check_strings(graph.asset_check_keys),
        # `__ASSET_JOB` is Dagster's implicit job, on both sides; compare only ours.
        "jobs": {j.name for j in repository.get_all_jobs() if not j.name.startswith("__")},
        "schedules": {s.name for s in repository.schedule_defs},
        "sensors": {s.name for s in repository.sensor_defs},
    }


# -- in process ----------------------------------------------------------------------------


def test_the_definitions_load_with_every_stream_check_job_and_schedule():
    dg.Definitions.validate_loadable(defs)
    view = defs_view()
    streams = {f"{service}/{name}" for service, names in STREAMS.items() for name in names}
    received = {
        "datahub/webhook_events",
        "conversation/agent_requests",
        "conversation/agent_messages",
    }
    assert view["assets"] == streams | {"warehouse/views"} | received | set(PUSH_LINEAGE)
    assert view["jobs"] == JOBS
    assert view["schedules"] == SCHEDULES
    assert view["sensors"] == {
        "datahub_webhooks_sensor",
        "conversation_agent_sensor",
        "alert_on_run_failure",
        "alert_on_run_success",
        "alert_on_state_changes",
    }
    # The checks required: ids unique on every stream; the reconciliations of the streams that
    # have a total to reconcile against; token expiry.
    assert {f"{stream}:ids_unique" for stream in streams} <= view["checks"]
    assert {
        "comment/trigger_logs:logs_match_daily_stats",
        "comment/trigger_logs:rows_equal_service_total",
        "comment/accounts:tokens_not_expiring",
        "datahub/members:rows_equal_export_row_count",
        "conversation/messages:rows_match_backup",
    } <= view["checks"]
    # Freshness is Dagster's own policy on each stream, not a check: 2 h for the hourly
    # streams, 26 h for the rest; owners and the tags a team filters by on every stream.
    # The hourly schedules pull exactly the streams declared hourly.
    repository = defs.get_repository_def()
    scheduled = set()
    for schedule in repository.schedule_defs:
        if schedule.cron_schedule.split()[1] == "*":
            job = repository.get_job(schedule.job_name)
            scheduled |= key_strings(job.asset_layer.selected_asset_keys)
    assert scheduled == HOURLY and HOURLY
    for asset in definitions.STREAM_ASSETS:
        spec = asset.specs_by_key[asset.key]
        name = "/".join(asset.key.path)
        window = timedelta(hours=2 if name in HOURLY else 26)
        assert spec.freshness_policy == dg.FreshnessPolicy.time_window(fail_window=window), name
        assert spec.owners == ["team:data"], name
        assert spec.tags["direction"] == "pull" and spec.tags["service"] == asset.key.path[0]
    assert not {c for c in view["checks"] if "freshness" in c}
    # Jobs select what their name says.
    repository = defs.get_repository_def()
    graph = defs.resolve_asset_graph()
    for service in SERVICES:
        for kind, partitioned in (("dimensions", False), ("daily", True)):
            job = repository.get_job(f"{service}_{kind}")
            selected = key_strings(job.asset_layer.selected_asset_keys)
            expected = {
                f"{service}/{name}"
                for name in STREAMS[service]
                if (f"{service}/{name}" in DAILY) == partitioned
            }
            assert selected == expected, job.name
    all_daily = repository.get_job("all_daily").asset_layer.selected_asset_keys
    assert key_strings(all_daily) == DAILY
    all_dimensions = repository.get_job("all_dimensions").asset_layer.selected_asset_keys
    assert key_strings(all_dimensions) == (streams - DAILY) | {"warehouse/views"}
    assert graph.get(dg.AssetKey(["warehouse", "views"])).parent_keys == {
        dg.AssetKey(key.split("/")) for key in streams
    }


def test_every_stream_asset_has_its_service_pool_kinds_group_and_partitions():
    assert len(definitions.STREAM_ASSETS) == len(PULLED)
    for asset in definitions.STREAM_ASSETS:
        service = asset.key.path[0]
        name = asset.key.to_user_string()
        spec = asset.specs_by_key[asset.key]
        assert asset.node_def.pool == f"{service}_api", name
        assert {"python", "parquet"} <= set(spec.kinds), name
        assert spec.group_name == service, name
        if name in DAILY:
            assert asset.partitions_def == daily, name
            assert asset.backfill_policy == dg.BackfillPolicy.single_run(), name
        else:
            assert asset.partitions_def is None, name
    assert daily.timezone == "UTC"


def test_every_check_is_partitioned_like_its_asset():
    """So a run over days plans each check once per day, and each day shows its result
    (assets/checks.py, `each_day`)."""
    graph = defs.resolve_asset_graph()
    keys = graph.asset_check_keys
    assert len(keys) > 20
    partitioned = set()
    for key in keys:
        asset = graph.get(key.asset_key).partitions_def
        assert graph.get(key).partitions_def == asset, key.to_user_string()
        if asset is not None:
            partitioned.add(key.to_user_string())
    # The day-partitioned streams' checks, those of their own among them.
    assert {
        "comment/trigger_logs:ids_unique",
        "comment/trigger_logs:logs_match_daily_stats",
        "comment/trigger_logs:rows_equal_service_total",
        "conversation/messages:rows_match_backup",
        "datahub/broadcast_reports:one_report_per_broadcast",
    } <= partitioned


# -- through the webserver -----------------------------------------------------------------

QUERY = """
{
  workspaceOrError {
    __typename
    ... on PythonError { message }
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError {
          __typename
          ... on PythonError { message }
          ... on RepositoryLocation {
            repositories {
              name
              jobs { name }
              schedules { name }
              sensors { name }
              assetNodes {
                assetKey { path }
                groupName
                dependencyKeys { path }
                tags { key value }
                metadataEntries {
                  label
                  ... on TableSchemaMetadataEntry {
                    schema { columns { name type description } }
                  }
                }
                assetChecksOrError {
                  __typename
                  ... on AssetChecks { checks { name } }
                }
              }
              allTopLevelResourceDetails {
                name
                configuredValues { key value type }
              }
            }
          }
        }
      }
    }
  }
}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_loaded(url: str, server: subprocess.Popen, log: Path) -> dict:
    """The GraphQL answer once the location has finished loading (or failed to)."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        if server.poll() is not None:
            raise AssertionError(f"the webserver exited:\n{log.read_text()[-3000:]}")
        try:
            answer = httpx.post(f"{url}/graphql", json={"query": QUERY}, timeout=30)
            if answer.status_code == 200:
                workspace = answer.json()["data"]["workspaceOrError"]
                entries = workspace.get("locationEntries", [])
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    return answer.json()
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"the webserver did not load in time:\n{log.read_text()[-3000:]}")
        time.sleep(0.25)


def test_the_webserver_loads_workspace_yaml_with_everything(
    frozen_sandbox, sync_env, tmp_path, monkeypatch
):
    # The environment a user of `make dev` has: every URL and key variable set.
    sync_env(frozen_sandbox)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    port = _free_port()
    log = tmp_path / "webserver.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "dagster_webserver", "-w", "workspace.yaml"]
            + ["-p", str(port), "-h", "127.0.0.1"],
            cwd=ROOT,
            env=os.environ.copy(),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its code server child stops with it (killpg below)
        )
    try:
        answer = _wait_until_loaded(f"http://127.0.0.1:{port}", server, log)
        info = httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=10).json()
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=5)
        except ProcessLookupError:
            pass
    assert info["dagster_version"] == dg.__version__
    assert "errors" not in answer, answer.get("errors")
    workspace = answer["data"]["workspaceOrError"]
    assert workspace["__typename"] == "Workspace", workspace
    (entry,) = workspace["locationEntries"]
    assert entry["name"] == "assets.definitions"
    location = entry["locationOrLoadError"]
    assert location["__typename"] == "RepositoryLocation", location.get("message")
    (repository,) = location["repositories"]
    nodes = repository["assetNodes"]
    for node in nodes:
        assert node["assetChecksOrError"]["__typename"] == "AssetChecks", node
    served = {
        "assets": {"/".join(n["assetKey"]["path"]) for n in nodes},
        "checks": {
            f"{'/'.join(n['assetKey']['path'])}:{c['name']}"
            for n in nodes
            for c in n["assetChecksOrError"]["checks"]
        },
        "jobs": {j["name"] for j in repository["jobs"] if not j["name"].startswith("__")},
        "schedules": {s["name"] for s in repository["schedules"]},
        "sensors": {s["name"] for s in repository["sensors"]},
    }
    expected = defs_view()
    assert served == expected
    # The streams, the views, the webhook events, the agent's two; two per record type.
    assert len(served["assets"]) == len(PULLED) + 4 + 2 * len(PUSHED)
    assert served["jobs"] == JOBS
    assert served["schedules"] == SCHEDULES
    assert {n["groupName"] for n in nodes} == {*SERVICES, "warehouse", "push"}
    _assert_the_catalog_shows_columns_services_and_the_push(nodes)
    # The UI shows each resource's configuration: keys appear as the variable that holds
    # them, never as their value.
    resources = {r["name"]: r for r in repository["allTopLevelResourceDetails"]}
    assert {"lake", *SERVICES} <= set(resources)
    shown = str(resources)
    for variable in ("COMMENT_AUTOMATION_API_KEY", "CONVERSATION_API_KEY", "DATAHUB_API_KEY"):
        assert os.environ[variable] not in shown, variable
        assert f'"api_key_env": "{variable}"' in shown, variable


def _assert_the_catalog_shows_columns_services_and_the_push(nodes: list[dict]) -> None:
    """What the UI's catalog shows, as the webserver answers it: every asset's column schema
    (a column's description from its model's field), a stream's service as a tag, and the
    push's lineage from the warehouse to the data hub."""
    by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes}
    columns = {}
    for key, node in by_key.items():
        (schema,) = [e for e in node["metadataEntries"] if e["label"] == "dagster/column_schema"]
        columns[key] = {c["name"]: c for c in schema["schema"]["columns"]}
        assert columns[key], key
        assert all(c["type"] for c in columns[key].values()), key
    # The spec's note on an activity's name, declared once on the model's field.
    assert columns["comment/activities"]["name"] == {
        "name": "name",
        "type": "string",
        "description": "Internal name.",
    }
    assert columns["comment/activities"]["status"]["description"] == (
        "`draft`, `active` or `paused`."
    )
    assert columns["comment/trigger_logs"]["created_at"]["type"] == "timestamp[us, tz=UTC]"
    assert columns["datahub/records/order"]["currency"]["type"] == "string"
    for service, names in STREAMS.items():
        for name in names:
            tags = {t["key"]: t["value"] for t in by_key[f"{service}/{name}"]["tags"]}
            assert tags["service"] == service, name
            assert columns[f"{service}/{name}"]["connection"]["description"], name
    for key, parents in PUSH_LINEAGE.items():
        assert {"/".join(d["path"]) for d in by_key[key]["dependencyKeys"]} == parents, key


def test_the_repositorys_instance_settings_keep_the_runs_own_lines_and_the_cores_warnings(
    tmp_path, monkeypatch
):
    """`make dev`'s instance (dagster.yaml): the UI shows what a step said at INFO (a push
    waiting for another, the figures it landed) and the core's warnings. Regression: with
    `python_log_level: WARNING` every `context.log.info` was dropped from the event log."""
    import logging
    import shutil

    shutil.copy(ROOT / "instance" / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))

    @dg.op
    def talk(context: dg.OpExecutionContext) -> None:
        context.log.info("the step's own line")
        logging.getLogger("pipelines").warning("the core's warning")
        logging.getLogger("pipelines").debug("the core's trace")

    @dg.job
    def talking() -> None:
        talk()

    with dg.DagsterInstance.get() as instance:
        run = talking.execute_in_process(instance=instance)
        said = {entry.user_message for entry in instance.all_logs(run.run_id)}
    assert {"the step's own line", "the core's warning"} <= said
    assert "the core's trace" not in said


def test_each_field_the_hub_receives_traces_to_its_outbound_view_column():
    """Column lineage of the push: every column of `<service>/records/<type>` comes from the
    column of the same name of `outbound/<view>`, and no other."""
    specs = {spec.key.to_user_string(): spec for spec in push.SPECS}
    for record_type, view in PUSHED.items():
        record = specs[records_of(record_type)]
        lineage = record.metadata["dagster/column_lineage"].deps_by_column
        columns = [c.name for c in record.metadata["dagster/column_schema"].columns]
        assert sorted(lineage) == sorted(columns) and len(columns) > 2, record_type
        for column, deps in lineage.items():
            assert [(d.asset_key.to_user_string(), d.column_name) for d in deps] == [
                (f"outbound/{view}", column)
            ]
        assert record.owners == ["team:data"]
        assert record.tags["direction"] == "push"


def test_owners_are_a_setting_and_a_wrong_one_is_said():
    assert owners({"ASSET_OWNERS": "team:growth, ana@example.com"}) == [
        "team:growth",
        "ana@example.com",
    ]
    assert owners({}) == ["team:data"]
    with pytest.raises(SetupError, match=r"ASSET_OWNERS names \['growth'\]: give emails"):
        owners({"ASSET_OWNERS": "growth"})
