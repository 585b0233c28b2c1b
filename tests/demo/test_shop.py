"""The demo shop (demo/shop.py) and the outbound views over it (demo/sql/shop,
demo/sql/outbound): the same seed gives the same tables, every quirk the push must handle is there,
and every outbound row is a body the sandbox's data hub accepts, except the planted invalid
ones, which it refuses on the field they break."""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, ValidationError

from demo import SQL_DIR as DEMO_SQL
from demo.shop import (
    BEHAVIOR_EVENTS,
    CONFLICTS,
    CUSTOMERS,
    FILE,
    HISTORY_END,
    SHOP_STREAMS,
    generate_shop,
    new_customer_id,
)
from pipelines.lake import Lake
from pipelines.pull.landing import today
from pipelines.registry import WAREHOUSE_STREAMS
from pipelines.stream import Stream
from pipelines.streams.datahub import MEMBERS
from pipelines.warehouse import SQL_DIR, Warehouse
from sandbox.app import build_app
from sandbox.config import SandboxConfig
from sandbox.datahub import record_models as records
from sandbox.datahub.contact_data import PROFILE_FIELDS
from sandbox.datahub.contact_models import ImportRequest, UpdateProfileRequest
from sandbox.datahub.contacts import ContactHub
from sandbox.datahub.custom_fields import PREFIX, checked_value
from sandbox.errors import ApiError
from tests.conftest import ANCHOR

VERSIONED = [stream for stream in SHOP_STREAMS if stream.name in CONFLICTS]
RECORD_MODELS: dict[str, type[BaseModel]] = {
    "coupons": records.CouponRecord,
    "orders": records.OrderRecord,
    "order_fulfillments": records.OrderFulfillmentRecord,
    "membership_tiers": records.MembershipTierRecord,
    "points": records.PointRecord,
    "reservations": records.ReservationRecord,
}
IDENTITY = ("channel_type", "external_channel_id", "external_member_id")
PROFILE_COLUMNS = ("member_level", "city", "birthday", "gender", "display_mobile")
#: The planted invalid rows of each outbound view, by the field the hub names.
REFUSED = {
    "coupons": {"url"},
    "orders": {"currency", "items", "items.0.price"},
    "order_fulfillments": set(),
    "membership_tiers": set(),
    "points": set(),
    "reservations": {"end_at"},
    "behavior_events": {"params.page_title"},
    "contact_profiles": {"data.display_mobile"},
    "member_imports": set(),
}


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hub() -> Iterator[ContactHub]:
    """The default region of a frozen sandbox: its contacts are what a pull would land."""
    app = build_app(SandboxConfig(frozen=True, now=ANCHOR))
    yield app.services[("datahub", "default")].hub
    app.sandbox.webhooks.close()


@pytest.fixture(scope="module")
def members(hub: ContactHub) -> list[dict]:
    names = set(MEMBERS.schema.names)
    return [
        {name: value for name, value in contact.items() if name in names}
        | {"connection": "default"}
        for page in hub.contacts.snapshot().rows()
        for contact in page
    ]


def pulled_lake(root: Path, members: list[dict]) -> Lake:
    lake = Lake(root)
    lake.write(MEMBERS, "default", members, day=today())
    return lake


def read(lake: Lake, stream: Stream) -> list[dict]:
    return pq.read_table(lake.path(stream, FILE)).to_pylist()


@pytest.fixture(scope="module")
def shop(tmp_path_factory, members) -> Lake:
    lake = pulled_lake(tmp_path_factory.mktemp("shop"), members)
    # A jp contact with a new shop customer's id: imports to default must still carry it.
    jp = members[0] | {"customer_id": new_customer_id(1), "connection": "jp"}
    lake.write(MEMBERS, "jp", [jp], day=today())
    generate_shop(lake)
    return lake


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory, shop) -> Iterator[duckdb.DuckDBPyConnection]:
    sql = tmp_path_factory.mktemp("sql") / "sql"
    shutil.copytree(SQL_DIR, sql)
    path = sql.parent / "warehouse.duckdb"
    Warehouse(path, shop, WAREHOUSE_STREAMS, sql, extra_sql=[DEMO_SQL]).refresh()
    with duckdb.connect(str(path), read_only=True) as con:
        yield con


def view(con: duckdb.DuckDBPyConnection, name: str) -> tuple[list[str], list[dict]]:
    cursor = con.execute(f"SELECT * FROM outbound.{name}")
    columns = [column[0] for column in cursor.description]
    return columns, [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


# -- the tables ---------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_tables(tmp_path, members) -> None:
    """Also after the hub changed its contacts on its own and took in the shop's import, so a
    second demo run has nothing to push."""
    lived = [m | {"city": "Elsewhere", "address": "Moved", "display_name": "x"} for m in members]
    imported = members[0] | {"member_id": 1, "customer_id": new_customer_id(1)}
    pulls = {"first": members, "later": [*lived, imported], "other_seed": members}
    lakes = {name: pulled_lake(tmp_path / name, rows) for name, rows in pulls.items()}
    seeds = {"first": 7, "later": 7, "other_seed": 8}
    counts = {name: generate_shop(lake, seed=seeds[name]) for name, lake in lakes.items()}
    assert counts["first"] == counts["later"]
    for stream in SHOP_STREAMS:
        first, later, other = (pq.read_table(lake.path(stream, FILE)) for lake in lakes.values())
        assert first.num_rows == counts["first"][stream.name] > 0
        assert first.equals(later), stream.name
        assert not first.equals(other), stream.name


def test_customers_are_pulled_members_and_some_new_ones(shop, members) -> None:
    customers = read(shop, CUSTOMERS)
    in_hub = {m["customer_id"]: m for m in members if m["customer_id"]}
    known = [c for c in customers if c["customer_id"] in in_hub]
    new = [c for c in customers if c["customer_id"] not in in_hub]
    assert len(customers) == 300 and len(known) == 240 and len(new) == 60
    for customer in known:
        member = in_hub[customer["customer_id"]]
        assert (customer["channel_type"], customer["external_member_id"]) == (
            member["channel_type"],
            member["external_member_id"],
        )
    assert all(c["channel_type"] is None for c in new)


def test_without_pulled_members_every_customer_is_new(tmp_path) -> None:
    lake = Lake(tmp_path)
    counts = generate_shop(lake, customers=40)
    assert counts["customers"] == 40
    assert all(c["customer_id"].startswith("W") for c in read(lake, CUSTOMERS))
    # Nothing to address a profile update to.
    assert counts["contact_changes"] == 0


def record_key(stream: Stream, row: dict) -> tuple:
    return tuple(row[name] for name in stream.key[:-1])


def canonical(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)


@pytest.mark.parametrize("stream", VERSIONED, ids=lambda s: s.name)
def test_records_have_versions_some_out_of_order(shop, stream) -> None:
    newest: dict[tuple, datetime] = {}
    versions: Counter[tuple] = Counter()
    late = set()
    for row in read(shop, stream):
        key = record_key(stream, row)
        versions[key] += 1
        if key in newest and row["timestamp"] < newest[key]:
            late.add(key)
        newest[key] = max(newest.get(key, row["timestamp"]), row["timestamp"])
    assert sum(count > 1 for count in versions.values()) > len(versions) / 3
    assert late
    assert max(newest.values()) <= HISTORY_END


@pytest.mark.parametrize("stream", [*VERSIONED, BEHAVIOR_EVENTS], ids=lambda s: s.name)
def test_some_rows_are_exact_duplicates(shop, stream) -> None:
    copies = Counter(canonical(row) for row in read(shop, stream))
    assert any(count > 1 for count in copies.values())


@pytest.mark.parametrize("stream", VERSIONED, ids=lambda s: s.name)
def test_one_key_has_two_versions_at_the_same_timestamp(shop, stream) -> None:
    contents: dict[tuple, set[str]] = defaultdict(set)
    for row in read(shop, stream):
        contents[(record_key(stream, row), row["timestamp"])].add(canonical(row))
    conflicts = [key for key, found in contents.items() if len(found) > 1]
    assert len(conflicts) == 1


def test_behavior_events_cover_every_behavior_once_per_key(shop) -> None:
    events = read(shop, BEHAVIOR_EVENTS)
    by_key: dict[str, set[str]] = defaultdict(set)
    for event in events:
        by_key[event["event_key"]].add(canonical(event))
    assert all(len(found) == 1 for found in by_key.values())  # a repeated key is a resend
    assert len(by_key) < len(events)
    assert {e["behavior"] for e in events} == set(records.PARAMS_BY_BEHAVIOR)


# -- the outbound views -------------------------------------------------------------------


def expected_columns(name: str, hub: ContactHub) -> list[str]:
    if name in RECORD_MODELS:
        return list(RECORD_MODELS[name].model_fields)
    if name == "behavior_events":
        return ["event_key", *records.BehaviorEvent.model_fields]
    if name == "member_imports":
        return ["import_key", "line_uid", *PROFILE_FIELDS]
    custom = [PREFIX + field["key"] for field in hub.custom_fields if field["active"]]
    return [*IDENTITY, *PROFILE_COLUMNS, *custom]


@pytest.mark.parametrize("name", REFUSED)
def test_outbound_views_have_the_record_fields(warehouse, hub, name) -> None:
    columns, rows = view(warehouse, name)
    assert rows
    assert columns == expected_columns(name, hub)


def as_json(value):
    """A value as the push sends it: date-times and dates in ISO 8601."""
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list):
        return [as_json(item) for item in value]
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    return value


def locations(error: ValidationError, prefix: str = "") -> set[str]:
    return {prefix + ".".join(map(str, found["loc"])) for found in error.errors()}


def refused_record(name: str, row: dict) -> set[str]:
    try:
        RECORD_MODELS[name].model_validate(as_json(row))
    except ValidationError as error:
        return locations(error)
    return set()


def refused_event(row: dict) -> set[str]:
    params = json.loads(row["params"])
    body = {key: value for key, value in row.items() if key != "event_key"}
    try:
        event = records.BehaviorEvent.model_validate(body | {"params": params})
    except ValidationError as error:
        return locations(error)
    try:
        records.PARAMS_BY_BEHAVIOR[event.behavior].model_validate(params)
    except ValidationError as error:
        return locations(error, "params.")
    return set()


def refused_profile(row: dict, hub: ContactHub) -> set[str]:
    # The contact must be one the hub finds, or the update is a 404.
    assert hub.contacts.find_by_channel(*(row[key] for key in IDENTITY)) is not None
    custom = {key: value for key, value in as_json(row).items() if key.startswith(PREFIX)}
    for key, value in custom.items():
        try:
            checked_value(hub.active_fields[key], value, key)
        except ApiError:
            return {key}
    data = {key: row[key] for key in PROFILE_COLUMNS} | {"custom_fields": custom}
    try:
        UpdateProfileRequest.model_validate(
            as_json({key: row[key] for key in IDENTITY}) | {"data": as_json(data)}
        )
    except ValidationError as error:
        return locations(error)
    return set()


def refused_import(row: dict) -> set[str]:
    data = {key: value for key, value in row.items() if key != "import_key"}
    try:
        ImportRequest.model_validate({"import_key": row["import_key"], "data": [as_json(data)]})
    except ValidationError as error:
        return locations(error)
    return set()


def refused_fields(name: str, row: dict, hub: ContactHub) -> set[str]:
    """The fields the sandbox's data hub names when it refuses `row` as a body."""
    if name in RECORD_MODELS:
        return refused_record(name, row)
    if name == "behavior_events":
        return refused_event(row)
    if name == "contact_profiles":
        return refused_profile(row, hub)
    return refused_import(row)


@pytest.mark.parametrize("name", REFUSED)
def test_outbound_rows_are_bodies_the_hub_accepts_but_the_planted_ones(
    warehouse, hub, name
) -> None:
    _, rows = view(warehouse, name)
    refused = [fields for row in rows if (fields := refused_fields(name, row, hub))]
    assert set().union(*refused) == REFUSED[name]
    # One row per planted kind, which may have been delivered twice.
    assert len(refused) <= 2 * len(REFUSED[name])


def test_member_imports_are_the_customers_the_hub_lacks(warehouse, shop, members) -> None:
    _, rows = view(warehouse, "member_imports")
    in_hub = {m["customer_id"] for m in members}
    new = {c["customer_id"] for c in read(shop, CUSTOMERS)} - in_hub
    assert {row["customer_id"] for row in rows} == new
    assert new_customer_id(1) in new  # a jp contact with its id does not count
    assert {row["import_key"] for row in rows} == {"customer_id"}
