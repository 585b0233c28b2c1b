"""The push against the sandbox's ground truth: newest version wins, nothing lost, nothing
sent twice, every refusal kept with its reason."""

import gc
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from itertools import accumulate
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import pyarrow.parquet as pq

from assets import datahub, push
from assets.failures import EXIT_CODE
from assets.resources import build_resources
from cli.main import main
from demo import SQL_DIR as DEMO_SQL
from demo.shop import SHOP_STREAMS, generate_shop, new_customer_id
from pipelines.clients.datahub import DataHubClient
from pipelines.lake import Lake
from pipelines.push import imports, plan, send
from pipelines.push import run as push_run
from pipelines.push.ledger import PUSHED, Ledger, as_json
from pipelines.push.plan import OUTBOUND, OUTCOMES, content_hash, row_key
from pipelines.push.run import connection_failed, outbound_rows
from pipelines.push.validation import moment, validate_record
from pipelines.settings import load_settings
from pipelines.warehouse.relations import refresh_warehouse, warehouse_of
from sandbox.faults import FaultSpec
from tests.pipelines.conftest import LiveSandbox
from tests.pipelines.test_warehouse import held_session

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ("coupon", "order", "order_fulfillment", "membership_tier", "point", "reservation")
#: The demo shop's customers where a test needs every kind of row (the planted invalid rows
#: and conflicts among them) but not many of each.
CUSTOMERS = 100
#: Where a test needs many rows: a push killed part way, pushes that overlap, faults drawn at
#: random.
MANY_CUSTOMERS = 200


def pushable(sandbox, sync_env, customers: int = CUSTOMERS, **env) -> dict:
    """A lake with the data hub pulled (members, custom fields) and the demo shop written."""
    resources = sync_env(sandbox, **env)
    with dg.DagsterInstance.ephemeral() as instance:
        dg.materialize(
            [datahub.ASSETS["custom_fields"], datahub.ASSETS["members"]],
            resources=resources,
            instance=instance,
        )
    generate_shop(resources["lake"].lake(), customers=customers)
    return resources


def outbound(resources, view: str) -> list[dict]:
    """The rows of `outbound.<view>`, as the push reads them."""
    lake = resources["lake"]
    with warehouse_of(lake.lake_root, lake.warehouse_path, lake.warehouse_sql).in_memory() as con:
        return list(outbound_rows(con, f"outbound.{view}"))


def run_push(resources, dry_run=False, record_types=(), check=True, materialized=None):
    """The job's figures; `materialized`, a list: extended with the assets the run recorded."""
    job = push.push_dry_run if dry_run else push.push
    config = {"dry_run": dry_run, "record_types": list(record_types)}
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(
            run_config={"ops": {"push_to_datahub": {"config": config}}},
            resources=resources,
            instance=instance,
            raise_on_error=check,
        )
    if materialized is not None:
        materialized += result.asset_materializations_for_node("push_to_datahub")
    return result.output_for_node("push_to_datahub") if result.success else result


def currents(sandbox, record_type: str) -> dict[str, dict]:
    answer = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/records/{record_type}")
    return {entry["key"]: entry for entry in answer.json()}


def newest_valid_versions(resources, record_type: str) -> dict[str, dict]:
    """What the sandbox must hold per key: its newest version, if that one is valid and the
    only one at its timestamp (a key whose newest version is invalid or in conflict waits,
    and none of its older versions is sent)."""
    versions = defaultdict(list)
    rows = outbound(resources, OUTBOUND[record_type].view)
    for row in rows:
        body, problems = validate_record(record_type, row)
        versions[row_key(record_type, row)].append((moment(row["timestamp"]), body))
    expected = {}
    for key, found in versions.items():
        newest = max(at for at, _ in found)
        at_newest = [body for at, body in found if at == newest]
        if None not in at_newest and len({content_hash(as_json(b)) for b in at_newest}) == 1:
            expected[key] = at_newest[0]
    return expected


def held_as_expected(sandbox, resources, record_type: str) -> dict[str, dict]:
    """The sandbox's current state of each key, asserted to be `newest_valid_versions`."""
    expected = newest_valid_versions(resources, record_type)
    held = currents(sandbox, record_type)
    assert set(held) == set(expected), record_type
    for key, body in expected.items():
        assert held[key]["current"]["timestamp"] == body["timestamp"], (record_type, key)
    return held


def test_each_key_holds_its_newest_version_sent_once(start_sandbox, sync_env):
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    figures = run_push(resources)
    for record_type in RECORDS:
        held = held_as_expected(sandbox, resources, record_type)
        assert all(entry["submissions"] == 1 for entry in held.values()), record_type
        assert figures[record_type]["sent"] == len(held)
        assert figures[record_type]["rejected"] > 0  # the planted invalid rows and conflict


def test_a_read_write_session_on_the_warehouse_does_not_stop_the_push(start_sandbox, sync_env):
    """Regression: the push read its outbound views from warehouse.duckdb, which an analyst's
    read-write session keeps every other process out of, and sent nothing. Here the session
    even has unsaved changes, so the file cannot be rebuilt either."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    lake = resources["lake"]
    refresh_warehouse(lake.lake_root, lake.warehouse_path, lake.warehouse_sql)
    unsaved = "CREATE TABLE main.notes AS SELECT 'mine' AS note"
    with held_session(Path(lake.warehouse_path), False, unsaved):
        figures = run_push(resources, record_types=["coupon"])
    held = held_as_expected(sandbox, resources, "coupon")
    assert figures["coupon"]["sent"] == len(held) > 0


def push_said(resources) -> tuple[dict, str]:
    """A real push's figures, and what it logged."""
    with dg.DagsterInstance.ephemeral() as instance:
        result = push.push.execute_in_process(resources=resources, instance=instance)
        said = "\n".join(record.user_message for record in instance.all_logs(result.run_id))
    return result.output_for_node("push_to_datahub"), said


def test_a_record_type_without_its_outbound_view_plans_nothing_and_the_others_proceed(
    start_sandbox, sync_env, monkeypatch, tmp_path
):
    """A product without the demo: the user has written only `outbound.coupons` (over the
    shop's tables); every other record type says its view is missing and plans nothing, and
    the coupons are sent (and are the only data hub records the run materializes). Without
    any folder in WAREHOUSE_SQL, nothing is planned at all."""
    sandbox = start_sandbox()
    pushable(sandbox, sync_env)
    own = tmp_path / "own_sql"
    for schema, names in {"shop": ("coupons", "customers"), "outbound": ("coupons",)}.items():
        (own / schema).mkdir(parents=True)
        for name in names:
            shutil.copy(DEMO_SQL / schema / f"{name}.sql", own / schema)
    monkeypatch.setenv("WAREHOUSE_SQL", str(own))
    resources = build_resources(load_settings())
    assert run_push(resources, dry_run=True)["order"] == dict.fromkeys(OUTCOMES, 0)
    figures, said = push_said(resources)
    for record_type, outbound in OUTBOUND.items():
        if record_type == "coupon":
            continue
        assert f"no outbound.{outbound.view} view: write one in a folder listed in " in said
        planned = {outcome: figures[record_type][outcome] for outcome in OUTCOMES}
        assert planned == dict.fromkeys(OUTCOMES, 0), record_type  # (the agent routed none)
    held = held_as_expected(sandbox, resources, "coupon")
    assert figures["coupon"]["sent"] == len(held) > 0
    # In the catalog, only the record type that has a view is pushed.
    recorded = []
    run_push(resources, materialized=recorded)
    assert [m.asset_key.to_user_string() for m in recorded] == ["datahub/records/coupon"]

    monkeypatch.delenv("WAREHOUSE_SQL")
    figures, said = push_said(build_resources(load_settings()))
    assert all(sum(counts.values()) == 0 for counts in figures.values())
    assert said.count("WAREHOUSE_SQL") == len(OUTBOUND)


def test_an_older_version_arriving_later_is_stale_and_never_sent(start_sandbox, sync_env):
    """The source now shows only an older version of an accepted order (a replica behind,
    a late event): it is counted stale, not sent, and the service keeps the newer one."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    run_push(resources, record_types=["order"])
    lake: Lake = resources["lake"].lake()
    orders = next(s for s in SHOP_STREAMS if s.name == "orders")
    table = pq.read_table(lake.path(orders, "shop")).to_pylist()
    held = currents(sandbox, "order")
    key = next(iter(held))
    versions = [r for r in table if r["id"] == key]
    older = dict(versions[0], timestamp=min(r["timestamp"] for r in versions).replace(year=2020))
    lake.write(orders, "shop", [r for r in table if r["id"] != key] + [older])
    figures = run_push(resources, record_types=["order"])
    assert figures["order"]["stale"] == 1
    assert figures["order"]["sent"] == 0
    assert currents(sandbox, "order")[key] == held[key]


def test_killed_half_way_and_run_again_every_row_is_accepted_once(
    start_sandbox, sync_env, monkeypatch
):
    """The run dies at its 301st submission, some way into its third record type (the demo
    shop's 100 customers give some 780 records): the second sends the rest, nothing twice."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    original = DataHubClient.submit
    calls = {"n": 0}
    lock = threading.Lock()

    def crashing(self, record_type, body, **options):
        with lock:
            calls["n"] += 1
            if calls["n"] > 300:
                raise RuntimeError("the process died here")
        return original(self, record_type, body, **options)

    monkeypatch.setattr(DataHubClient, "submit", crashing)
    failed = run_push(resources, record_types=list(RECORDS), check=False)
    assert not failed.success
    monkeypatch.setattr(DataHubClient, "submit", original)
    figures = run_push(resources, record_types=list(RECORDS))
    assert sum(f["unchanged"] for f in figures.values()) > 0  # the first run's work counted
    for record_type in RECORDS:
        held = held_as_expected(sandbox, resources, record_type)
        assert all(entry["submissions"] == 1 for entry in held.values()), record_type


def test_429s_with_retry_after_still_land_every_row_once_under_the_limit(start_sandbox, sync_env):
    sandbox = start_sandbox(rate_limits=True, rate_window_seconds=5)
    resources = pushable(
        sandbox,
        sync_env,
        customers=MANY_CUSTOMERS,
        pace=True,
        sync_toml="[service.datahub]\nrate_window_seconds = 5\n",
    )
    sandbox.app.sandbox.faults.spec = FaultSpec(rate=0.05, retry_after=1)
    figures = run_push(resources, record_types=["contact_profile", "coupon"])
    assert sandbox.app.sandbox.faults.injected.get("rate", 0) > 0
    assert sandbox.app.sandbox.limiter.refused == 0  # the profile-update limit itself
    held = held_as_expected(sandbox, resources, "coupon")
    assert all(entry["submissions"] == 1 for entry in held.values())
    updates = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/profile-updates").json()
    assert updates["accepted"] == figures["contact_profile"]["sent"] > 0


def test_a_connection_the_hub_drops_mid_push_is_said_as_the_services_fault(start_sandbox, sync_env):
    """Every connection closed before its answer: the behavior event sent is in doubt and
    the push fails once, naming the service and what becomes of the rows, in the product's
    words (it was httpcore's `RemoteProtocolError` text)."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    sandbox.app.sandbox.faults.spec = FaultSpec(drop=1.0)
    result = run_push(resources, record_types=["behavior_event"], check=False)
    assert not result.success
    [failure] = [event for event in result.all_events if event.is_step_failure]
    error = failure.step_failure_data.error
    assert error.cls_name == "Failure", error.message
    assert f"the service at {sandbox.url} failed while a row was sent" in error.message
    assert "in doubt" in error.message and "httpcore" not in error.message
    metadata = failure.step_failure_data.user_failure_data.metadata
    assert metadata[EXIT_CODE].value == 1
    sandbox.app.sandbox.faults.spec = FaultSpec()
    planned = run_push(resources, dry_run=True, record_types=["behavior_event"])
    assert 1 <= planned["behavior_event"]["in_doubt"] <= 8


def test_a_failed_connection_names_the_service_by_its_host_alone():
    """A base URL may carry a user and password, or a token in its query: never said."""
    request = httpx.Request("POST", "https://user:s3cret@hub.example.com:8443/v1/x?token=t0k")
    said = str(connection_failed(httpx.RemoteProtocolError("closed", request=request)))
    assert "the service at https://hub.example.com:8443 failed" in said
    assert "s3cret" not in said and "t0k" not in said and "user" not in said


def test_invalid_rows_of_every_kind_are_kept_with_their_field(start_sandbox, sync_env):
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    recorded = []
    figures = run_push(resources, materialized=recorded)
    with duckdb.connect(resources["lake"].warehouse_path, read_only=True) as con:
        rejected = con.execute("SELECT record_type, field, source FROM sync.rejected").fetchall()
    fields = {(t, f) for t, f, s in rejected if s == "validation"}
    for planted in [
        ("order", "currency"),
        ("order", "items"),
        ("order", "items.0.price"),
        ("coupon", "url"),
        ("reservation", "end_at"),
        ("behavior_event", "params.page_title"),
        ("contact_profile", "data.display_mobile"),
    ]:
        assert planted in fields
    conflicts = {t for t, f, s in rejected if s == "conflict"}
    assert conflicts == set(RECORDS)
    # Each record type's page shows its newest rejected rows, with the field and the reason.
    orders = next(m for m in recorded if m.asset_key.to_user_string() == "datahub/records/order")
    shown = [record.data for record in orders.metadata["rejected_rows"].records]
    assert {row["field"] for row in shown} >= {"currency", "items", "items.0.price"}, shown
    assert all(row["reason"] and row["key"] for row in shown)
    for record_type in RECORDS:
        assert figures[record_type]["sent"] == len(newest_valid_versions(resources, record_type))


def more_new_customers(lake: Lake, rows: int) -> None:
    """`shop.customers` with as many more customers the hub lacks as make `outbound.member_imports`
    `rows` long: copies of the shop's own new customers under ids (and e-mails) of their own.
    The demo shop of that many customers would also write their orders, events and the rest
    (some 650,000 rows, 59 s of CPU) that an import never reads."""
    customers = next(s for s in SHOP_STREAMS if s.name == "customers")
    table = pq.read_table(lake.path(customers, "shop")).to_pylist()
    new = [row for row in table if row["customer_id"].startswith("W")]
    first = len(table) + 1
    copies = []
    for n in range(rows - len(new)):
        row = new[n % len(new)]
        customer_id = new_customer_id(first + n)
        email = row["display_email"].replace(row["customer_id"].lower(), customer_id.lower())
        copies.append(row | {"customer_id": customer_id, "display_email": email})
    lake.write(customers, "shop", table + copies)


def test_25000_import_rows_go_as_3_requests_and_a_restart_does_not_resend(
    start_sandbox, sync_env, monkeypatch
):
    sandbox = start_sandbox(rate_limits=True)  # imports: 15 per minute, for real
    resources = pushable(sandbox, sync_env)
    more_new_customers(resources["lake"].lake(), 25_000)
    original = DataHubClient.import_members
    started = []

    def dying_after_two(self, import_key, data):
        if len(started) == 2:
            raise RuntimeError("the process died here")
        started.append(len(data))
        return original(self, import_key, data)

    monkeypatch.setattr(DataHubClient, "import_members", dying_after_two)
    assert not run_push(resources, record_types=["member_import"], check=False).success
    monkeypatch.setattr(DataHubClient, "import_members", original)
    figures = run_push(resources, record_types=["member_import"])
    tasks = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/imports").json()
    rows = len(outbound(resources, "member_imports"))
    assert rows == 25_000
    assert len(tasks) == 3 and all(task["status"] == "success" for task in tasks)
    assert started == [10_000, 10_000]
    assert figures["member_import"]["unchanged"] == 20_000
    assert figures["member_import"]["sent"] == rows - 20_000
    assert sandbox.app.sandbox.limiter.refused == 0


def test_several_import_tasks_are_in_flight_at_once_and_every_row_lands_once(
    start_sandbox, sync_env, monkeypatch
):
    # Each task takes 2 x 1.5 s: one chunk at a time, every task before an import is done,
    # even when a busy machine spaces the imports' requests by most of a second.
    sandbox = start_sandbox(task_phase_seconds=1.5)
    resources = pushable(sandbox, sync_env)
    members_before = sandbox.truth()["datahub"]["default"]["members"]
    planned = run_push(resources, dry_run=True, record_types=["member_import"])
    rows = planned["member_import"]["new"]
    chunks = imports.IMPORTS_IN_FLIGHT + 1  # one more than may be in flight
    per_chunk = -(-rows // chunks)
    assert rows > 0 and -(-rows // per_chunk) == chunks
    monkeypatch.setattr(imports, "send_imports", partial(imports.send_imports, max_rows=per_chunk))
    original = DataHubClient.import_members
    unfinished = []  # after each import: the import tasks the sandbox has not finished

    def observed(self, import_key, data):
        task = original(self, import_key, data)
        tasks = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/imports").json()
        unfinished.append(sum(t["status"] in ("pending", "processing") for t in tasks))
        return task

    monkeypatch.setattr(DataHubClient, "import_members", observed)
    figures = run_push(resources, record_types=["member_import"])
    assert len(unfinished) == chunks
    # The first imports start within milliseconds, well inside a task's seconds: all in
    # flight together, and never more (sequential imports see only their own task).
    assert max(unfinished) == imports.IMPORTS_IN_FLIGHT
    tasks = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/imports").json()
    assert len(tasks) == chunks and all(task["status"] == "success" for task in tasks)
    assert sum(task["rows"] for task in tasks) == rows
    assert sandbox.truth()["datahub"]["default"]["members"] - members_before == rows
    assert figures["member_import"]["sent"] == rows and figures["member_import"]["refused"] == 0
    ledger = Ledger(resources["lake"].lake()).latest("member_import")
    assert len(ledger) == rows and {entry.state for entry in ledger.values()} == {"accepted"}


def test_a_dry_run_sends_nothing_and_predicts_the_real_run(start_sandbox, sync_env):
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    recorded = []
    planned = run_push(resources, dry_run=True, materialized=recorded)
    assert all(currents(sandbox, t) == {} for t in RECORDS)
    assert httpx.get(f"{sandbox.url}/_sandbox/datahub/default/imports").json() == []
    # The catalog's records assets (data hub, conversation) are materialized by real pushes
    # only.
    assert recorded == []
    done = run_push(resources, materialized=recorded)
    for record_type, figures in planned.items():
        real = done[record_type]
        assert {k: real[k] for k in figures} == figures, record_type
        assert real["sent"] == figures["new"] + figures["changed"], record_type
    by_asset = {m.asset_key.to_user_string(): m.metadata for m in recorded}
    assert set(by_asset) == {
        f"{OUTBOUND[record_type].service}/records/{record_type}" for record_type in done
    }
    assert by_asset["datahub/records/order"]["sent"].value == done["order"]["sent"] > 0


def test_a_push_plans_with_the_collector_paused_and_resumes_it(
    start_sandbox, sync_env, monkeypatch
):
    """The plan's rows, ledger entries and bodies outlive its making: the cyclic collector
    waits until they are made (`pipelines/process.py`, `collector_paused`), then runs again
    for the sends."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    collecting = []

    def make_plan(*args, **kwargs):
        collecting.append(gc.isenabled())
        return plan.make_plan(*args, **kwargs)

    monkeypatch.setattr(push_run, "make_plan", make_plan)
    planned = run_push(resources, dry_run=True)
    assert sum(figures["new"] for figures in planned.values()) > 0
    assert collecting and not any(collecting)  # a plan per batch of keys, none collected
    assert gc.isenabled()


#: A contact whose latest shop change was valid, so its profile was accepted.
PUSHED_CONTACT = r"""
SELECT changes.customer_id
FROM shop.contact_changes AS changes
JOIN shop.customers USING (customer_id)
JOIN datahub.members ON members.customer_id = changes.customer_id
    AND members.connection = 'default'
WHERE customers.external_channel_id IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY changes.customer_id ORDER BY changed_at DESC) = 1
    AND regexp_full_match(changes.display_mobile, '\+[1-9][0-9]{7,14}')
ORDER BY changes.customer_id
LIMIT 1
"""


def test_a_profile_update_sends_only_what_changed(start_sandbox, sync_env, monkeypatch):
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    run_push(resources, record_types=["contact_profile"])
    lake: Lake = resources["lake"].lake()
    changes = next(s for s in SHOP_STREAMS if s.name == "contact_changes")
    table = pq.read_table(lake.path(changes, "shop")).to_pylist()
    with duckdb.connect(resources["lake"].warehouse_path, read_only=True) as con:
        [(customer,)] = con.execute(PUSHED_CONTACT).fetchall()
    latest = max((r for r in table if r["customer_id"] == customer), key=lambda r: r["changed_at"])
    table.append(dict(latest, changed_at=latest["changed_at"].replace(year=2030), city="Kaohsiung"))
    lake.write(changes, "shop", table)
    sent = []
    original = DataHubClient.update_channel_contact_profile

    def capture(self, body):
        sent.append(body)
        return original(self, body)

    monkeypatch.setattr(DataHubClient, "update_channel_contact_profile", capture)
    figures = run_push(resources, record_types=["contact_profile"])
    assert figures["contact_profile"]["changed"] == 1 and figures["contact_profile"]["sent"] == 1
    assert [body["data"] for body in sent] == [{"city": "Kaohsiung"}]


def test_a_failed_import_task_is_retried_and_its_size_recorded(start_sandbox, sync_env):
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    httpx.post(f"{sandbox.url}/_sandbox/datahub/default/imports/fail-next").raise_for_status()
    figures = run_push(resources, record_types=["member_import"])
    tasks = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/imports").json()
    assert [task["status"] for task in tasks] == ["failed", "success"]
    assert figures["member_import"]["sent"] == figures["member_import"]["new"] > 0
    ledger = Ledger(resources["lake"].lake()).latest("member_import")
    assert {entry.state for entry in ledger.values()} == {"accepted"}
    sizes = lake_query(
        resources, "SELECT DISTINCT updated_contact_size FROM {pushed} WHERE state = 'accepted'"
    )
    assert sizes == [(tasks[1]["updated_contact_size"],)]


def lake_query(resources, sql: str) -> list[tuple]:
    lake = resources["lake"].lake()
    return lake.query(sql.format(pushed=lake.relation(PUSHED)))


def rejected_rows(resources, source: str) -> dict[str, str]:
    """The warehouse's `sync.rejected` rows of one source: key -> reason."""
    with duckdb.connect(resources["lake"].warehouse_path, read_only=True) as con:
        rows = con.execute(
            "SELECT key, reason FROM sync.rejected WHERE source = ?", [source]
        ).fetchall()
    return dict(rows)


def test_a_key_whose_newest_version_is_invalid_or_in_conflict_waits_until_fixed(
    start_sandbox, sync_env
):
    """Regression: with a valid 10:00 version and an invalid 11:00 one, the 10:00 version was
    sent and became the hub's current state, though the warehouse knew it was superseded."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    run_push(resources, record_types=["order"])
    held = currents(sandbox, "order")
    planted = rejected_rows(resources, "waiting")  # the demo shop's own conflict
    lake: Lake = resources["lake"].lake()
    orders = next(s for s in SHOP_STREAMS if s.name == "orders")
    table = pq.read_table(lake.path(orders, "shop")).to_pylist()
    invalid_key, conflict_key = sorted(held)[:2]

    def newest(key: str) -> dict:
        return max((r for r in table if r["id"] == key), key=lambda r: r["timestamp"])

    later = newest(invalid_key)["timestamp"] + timedelta(hours=1)
    invalid = newest(invalid_key) | {"timestamp": later, "currency": "TWDX"}
    conflict_at = newest(conflict_key)["timestamp"] + timedelta(hours=1)
    returned = newest(conflict_key) | {"timestamp": conflict_at, "status": "returned"}
    cancelled = returned | {"status": "cancelled"}
    # A key never sent: a valid version at 10:00, an invalid one at 11:00.
    fresh_valid = newest(invalid_key) | {"id": "O-NEWEST-INVALID"}
    fresh_invalid = fresh_valid | {"timestamp": later, "currency": "TWDX"}
    lake.write(orders, "shop", table + [invalid, returned, cancelled, fresh_valid, fresh_invalid])

    figures = run_push(resources, record_types=["order"])
    assert figures["order"]["sent"] == 0
    assert figures["order"]["waiting"] == len(planted) + 3
    assert currents(sandbox, "order") == held
    waiting = rejected_rows(resources, "waiting")
    assert set(waiting) - set(planted) == {invalid_key, conflict_key, "O-NEWEST-INVALID"}
    assert f"newest version ({later.isoformat()}) is invalid" in waiting[invalid_key]
    assert "conflict" in waiting[conflict_key]

    fixed = [invalid, returned, fresh_valid, fresh_invalid]
    fixed[0], fixed[3] = (row | {"currency": "TWD"} for row in (invalid, fresh_invalid))
    lake.write(orders, "shop", table + fixed)
    figures = run_push(resources, record_types=["order"])
    assert figures["order"]["sent"] == 3 and figures["order"]["waiting"] == len(planted)
    now_held = currents(sandbox, "order")
    for key, version in [
        (invalid_key, invalid),
        (conflict_key, returned),
        ("O-NEWEST-INVALID", fresh_invalid),
    ]:
        assert moment(now_held[key]["current"]["timestamp"]) == version["timestamp"], key
    assert now_held[invalid_key]["current"]["currency"] == "TWD"
    assert now_held[conflict_key]["current"]["status"] == "returned"
    assert now_held["O-NEWEST-INVALID"]["submissions"] == 1
    assert rejected_rows(resources, "waiting") == planted


#: Where the sandbox takes commerce records and behavior events (sandbox/README.md).
SUBMISSION_PATHS = ("/datahub/v1/records/", "/datahub/v1/events/behavior")


def submissions(sandbox) -> int:
    return sum(
        entry["count"]
        for entry in sandbox.app.traffic.summary()
        if entry["method"] == "POST" and entry["path"].startswith(SUBMISSION_PATHS)
    )


def push_until(
    sandbox,
    env: dict,
    types: list[str],
    stop_at: int | None,
    output: Path | None = None,
    seen=submissions,
) -> int | None:
    """`python -m cli push` as a user runs it; SIGKILLed once the sandbox has seen
    `stop_at` submissions (`seen(sandbox)` counts them). Its exit code, or None if it was
    killed. What it printed goes to `output`, where given."""
    with open(output or os.devnull, "w") as printed:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli", "push", "--types", *types],
            cwd=ROOT,
            env=env,
            stdout=printed,
            stderr=subprocess.STDOUT,
        )
    try:
        while process.poll() is None:
            if stop_at is not None and seen(sandbox) >= stop_at:
                process.send_signal(signal.SIGKILL)
                process.wait()
                return None
            time.sleep(0.005)
        return process.returncode
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def submissions_of(record_type: str) -> Callable[[LiveSandbox], int]:
    """How many submissions of `record_type` the sandbox has seen: a `seen` of `push_until`."""
    path = f"/datahub/v1/records/{record_type.replace('_', '-')}"

    def seen(sandbox: LiveSandbox) -> int:
        summary = sandbox.app.traffic.summary()
        return sum(e["count"] for e in summary if e["method"] == "POST" and e["path"] == path)

    return seen


def kill_points(
    planned: dict[str, dict[str, int]], types: list[str], seed: int
) -> list[tuple[int, Callable[[LiveSandbox], int]]]:
    """Where a push of `types` (records, then behavior events, sent in that order) is killed:
    `push_until`'s `stop_at` and `seen`, one at a random point of each phase of a push that a
    kill interrupts differently. In the first record type, before any record type's journal
    was compacted into the ledger; at a later record type's first submission, just after the
    ones before it were compacted (the restart reads them from the ledger, its own answers
    from the journal); at a random point of the later record types, with the ledger and the
    journal both holding some; at a random point of the behavior events (sent last: marked
    `sending`, fsynced, never sent again)."""
    ends = dict(zip(types, accumulate(planned[t]["new"] for t in types), strict=True))
    records, everything = ends[types[-2]], ends[types[-1]]
    draw = random.Random(seed)
    later = draw.choice(types[2:-1])  # a record type that follows at least two others
    return [
        (draw.randrange(1, ends[types[0]]), submissions),
        (1, submissions_of(later)),
        (draw.randrange(ends[later] - planned[later]["new"] + 2, records), submissions),
        (draw.randrange(records + 1, everything), submissions),
    ]


def test_a_push_killed_at_random_points_resends_at_most_what_was_in_flight(start_sandbox, sync_env):
    """Regression: 10 SIGKILLs during a push, then full runs, stored 2,083 submissions
    twice (529 behavior events among them): acknowledgements were written to the ledger
    every 500 rows, so a kill lost up to a batch of them. A kill in each phase of a push
    (`kill_points`) shows what those ten showed: each process start and plan costs seconds."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env, customers=MANY_CUSTOMERS)
    types = [*RECORDS, "behavior_event"]
    planned = run_push(resources, dry_run=True, record_types=types)
    total = sum(figures["new"] for figures in planned.values())
    cuts = kill_points(planned, types, seed=20261123)
    kills = len(cuts)
    env = dict(os.environ)
    for cut, seen in cuts:
        stop_at = max(cut, seen(sandbox) + 1)
        killed = push_until(sandbox, env, types, stop_at, seen=seen)
        assert killed is None, "the push ended before its kill"
    assert push_until(sandbox, env, types, None) == 0
    assert push_until(sandbox, env, types, None) == 0  # a run with no change
    assert submissions(sandbox) >= total

    twice = 0
    for record_type in RECORDS:
        held = held_as_expected(sandbox, resources, record_type)
        twice += sum(entry["submissions"] - 1 for entry in held.values())
    assert twice <= kills * send.WORKERS

    # Behavior events: no key stored twice (a body as often as the keys that carry it: some
    # events are alike); a key never stored is one a kill left in doubt (some in doubt did
    # arrive: the hub cannot be asked, so they are reported either way).
    keys_of = defaultdict(set)
    for row in outbound(resources, "behavior_events"):
        body, problems = validate_record("behavior_event", row)
        if not problems:
            keys_of[as_json(body)].add(row["event_key"])
    stored = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/behavior-events/all").json()
    stored_bodies = Counter(as_json(entry["event"]) for entry in stored)
    assert all(count <= len(keys_of[body]) for body, count in stored_bodies.items())
    never_stored = sum(len(keys) - stored_bodies[body] for body, keys in keys_of.items())
    in_doubt = rejected_rows(resources, "in_doubt")
    assert never_stored <= len(in_doubt) <= kills * send.WORKERS


def test_a_push_with_nothing_new_reads_no_row_of_a_view(
    start_sandbox, sync_env, monkeypatch, capsys
):
    """Once a push has decided every key without a request, the next one with nothing new
    hands Python no row (`pipelines/push/changes.py`), sends nothing and says the same
    figures, once; `push --retry-refused` with nothing refused is such a push too."""
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    run_push(resources)
    settled = run_push(resources)  # what was sent, unchanged now
    before = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/records/order").json()
    planned = []

    def make_plan(record_type, rows, *args, **kwargs):
        planned.extend(rows)
        return plan.make_plan(record_type, rows, *args, **kwargs)

    monkeypatch.setattr(push_run, "make_plan", make_plan)
    assert run_push(resources) == settled
    capsys.readouterr()
    assert main(["push", "--retry-refused"]) == 0
    assert planned == []
    # Each record type's figures are said once: its row of the table.
    said = capsys.readouterr()
    lines = (said.out + said.err).splitlines()
    [row] = [line for line in lines if line.split()[:1] in (["order"], ["order:"])]
    assert row.split()[1:4] == [f"{settled['order'][n]:,}" for n in ("new", "changed", "unchanged")]
    assert settled["order"]["unchanged"] > 0 and settled["order"]["rejected"] > 0
    after = httpx.get(f"{sandbox.url}/_sandbox/datahub/default/records/order").json()
    assert after == before
