"""Conformance of the data hub's commerce records and behavior events to its documented rules.

One sandbox serves the module (rows never collide: every test uses fresh keys); tests that
count everything a store holds, or listen to webhooks, build their own.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from sandbox.app import build_app
from sandbox.config import SandboxConfig
from sandbox.datahub.record_models import OrderRecord
from sandbox.datahub.records import RECORD_TYPES, records_admin
from tests.conftest import ANCHOR
from tests.constants import APIKEY

BASE = {"default": "/datahub", "jp": "/datahub-jp"}
# The hub documents no paths for these operations; these are the sandbox's.
PATHS = {
    "coupon": "/v1/records/coupon",
    "order": "/v1/records/order",
    "order_fulfillment": "/v1/records/order-fulfillment",
    "membership_tier": "/v1/records/membership-tier",
    "point": "/v1/records/point",
    "reservation": "/v1/records/reservation",
}
BEHAVIOR_PATH = "/v1/events/behavior"
KINDS = list(PATHS)
RECEIVED_AT = "2026-11-01T12:00:00+00:00"  # the frozen clock (conftest ANCHOR)
_serial = itertools.count()


def fresh(prefix: str = "k") -> str:
    return f"{prefix}-{next(_serial)}-{uuid.uuid4().hex[:8]}"


def chars(n: int) -> str:
    """A string of exactly n characters, unique in its first ones so keys do not collide."""
    return (uuid.uuid4().hex * (n // 32 + 1))[:n]


ITEM = {"id": "sku-1", "name": "Linen shirt", "price": 39.9, "count": 2}
ORDER_ITEM = ITEM | {"category": "shirts", "variant": "M", "discount": 5, "coupon_id": "cp-1"}


def minimal(kind: str, **changes) -> dict:
    """A valid record with only the required fields, on fresh keys."""
    common = {
        "timestamp": "2026-10-01T09:30:00+00:00",
        "source_platform_name": "shopify",
        "source_store_type": "online_store",
        "source_store_id": "store-1",
        "source_platform_customer_id": fresh("cust"),
    }
    own = {
        "coupon": {
            "id": fresh("cp"),
            "name": "Spring 10% off",
            "url": "https://shop.example/coupons/spring",
            "code": "SPRING10",
            "is_redeemable": True,
            "status": "active",
            "discount_type": "percentage",
            "discount_value": 10,
        },
        "order": {
            "id": fresh("ord"),
            "status": "created",
            "total_amount": 79.8,
            "currency": "USD",
            "items": [dict(ITEM)],
            "payment_method": "credit_card",
            "delivery_method": "home_delivery",
            "shipping_location": "Taipei",
        },
        "order_fulfillment": {
            "order_id": fresh("ord"),
            "fulfillment_status": "unfulfilled",
            "shipping_location": "Taipei",
            "shipping_status": "pending",
        },
        "membership_tier": {"tier_id": "gold", "tier_name": "Gold", "tier_status": "active"},
        "point": {"balance": 120, "type": "loyalty_point"},
        "reservation": {
            "id": fresh("rsv"),
            "status": "scheduled",
            "start_at": "2026-11-05T01:00:00+00:00",
            "end_at": "2026-11-05T02:00:00+00:00",
            "description": "Cut and style",
            "service_type": "salon",
            "service_id": "svc-1",
            "service_name": "Haircut",
        },
    }[kind]
    return common | own | changes


def without(body: dict, field: str) -> dict:
    return {k: v for k, v in body.items() if k != field}


def key_of(kind: str, body: dict) -> str:
    customer = body["source_platform_customer_id"]
    return {
        "coupon": body.get("id"),
        "order": body.get("id"),
        "order_fulfillment": body.get("order_id"),
        "membership_tier": f"{customer}:{body.get('tier_id')}",
        "point": f"{customer}:{body.get('type')}",
        "reservation": f"{customer}:{body.get('id')}",
    }[kind]


@pytest.fixture(scope="module")
def app():
    built = build_app(SandboxConfig(frozen=True, now=ANCHOR, rate_limits=False))
    yield built
    built.sandbox.webhooks.close()


@pytest.fixture(scope="module")
def client(app):
    with TestClient(app, base_url="http://sandbox") as c:
        yield c


def submit(client, kind: str, body, region: str = "default", headers=APIKEY):
    return client.post(BASE[region] + PATHS[kind], json=body, headers=headers)


def current(client, kind: str, key: str, region: str = "default"):
    return client.get(f"/_sandbox/records/{kind}/{key}", params={"region": region})


def assert_refused(answer, field: str) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["field"] == field
    assert error["message"]


def assert_accepted(answer) -> str:
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"event_id"}
    assert uuid.UUID(body["event_id"]).version == 4
    return body["event_id"]


# --- accepted records -------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_minimal_record_is_accepted_and_becomes_current(client, kind):
    body = minimal(kind)
    event_id = assert_accepted(submit(client, kind, body))
    found = current(client, kind, key_of(kind, body))
    assert found.status_code == 200
    assert found.json() == {
        "record_type": kind,
        "key": key_of(kind, body),
        "current": body,
        "event_id": event_id,
        "submissions": 1,
        "received_at": RECEIVED_AT,
    }


def test_a_record_key_the_sandbox_is_asked_to_refuse_is_refused_until_let_go(client):
    """`PUT /_sandbox/datahub/<region>/records/<type>/refused`: those keys are answered 422
    `record_refused` (nothing stored), others are taken, and `{"keys": []}` lets them go."""
    refused, other = minimal("order"), minimal("order")
    route = "/_sandbox/datahub/default/records/order/refused"
    assert client.put(route, json={"keys": [refused["id"]]}).json() == {"refused": [refused["id"]]}
    answer = submit(client, "order", refused)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "record_refused"
    assert answer.json()["error"]["field"] == "id"
    assert current(client, "order", refused["id"]).status_code == 404
    assert_accepted(submit(client, "order", other))
    assert client.put(route, json={"keys": []}).status_code == 200
    assert_accepted(submit(client, "order", refused))
    assert current(client, "order", refused["id"]).json()["submissions"] == 1
    assert (
        client.put("/_sandbox/datahub/default/records/nope/refused", json={"keys": []}).status_code
        == 404
    )


FULL_EXTRAS = {
    "coupon": {
        "description": "Ten percent off linen",
        "source_status": "ENABLED",
        "valid_from": "2026-09-01T00:00:00+00:00",
        "valid_to": None,
        "applicable_store_ids": ["store-1"],
        "applicable_item_ids": [],
        "applicable_item_category_ids": None,
        "source_discount_type": "PERCENT",
    },
    "order": {
        "items": [dict(ORDER_ITEM)],
        "source_status": "paid",
        "description": "gift wrap",
        "store_description": "Flagship",
        "shipping_address": "1 Main St",
        "subtotal_amount": 79.8,
        "total_discount": 0,
        "shipping_amount": 5,
        "tax_amount": 4.2,
        "paid_amount": 89,
        "coupon_id": "cp-1",
        "promotion_name": "Spring",
        "promotion_id": "pr-1",
        "payment_transaction_id": "tx-1",
        "payment_provider": "stripe",
        "pickup_store_id": None,
        "pickup_store_name": None,
    },
    "order_fulfillment": {
        "fulfillment_source_status": "open",
        "shipping_source_status": "label",
        "delivery_method": "courier",
        "shipping_address": "1 Main St",
        "shipping_carrier": "DHL",
        "shipping_tracking_id": "TRK1",
        "shipping_tracking_url": "https://track.example/TRK1",
        "estimated_delivery_date": "2026-11-03",
        "pickup_store_id": "store-2",
        "pickup_store_name": "Downtown",
        "shipped_at": "2026-10-02T08:00:00+00:00",
        "delivered_at": None,
    },
    "membership_tier": {
        "tier_description": "Top tier",
        "tier_source_status": "ACTIVE",
        "tier_effective_from": "2026-01-01T00:00:00+00:00",
        "tier_expiry_at": "2027-01-01T00:00:00+00:00",
        "currency": "TWD",
        "lifetime_spend_amount": 12000.5,
        "lifetime_spend_updated_at": "2026-10-01T00:00:00+00:00",
        "tier_spend_amount": 3000,
    },
    "point": {"currency": None, "expiry_at": "2027-03-31T23:59:59+00:00"},
    "reservation": {
        "source_status": "booked",
        "address": "2 Side St",
        "staff_id": "st-1",
        "staff_name": "Aiko",
    },
}


@pytest.mark.parametrize("kind", KINDS)
def test_record_with_every_optional_field_is_kept_as_submitted(client, kind):
    body = minimal(
        kind,
        source_store_name="Flagship",
        channel_type="line",
        external_channel_id="chan-1",
        external_member_id="mem-1",
        **FULL_EXTRAS[kind],
    )
    assert_accepted(submit(client, kind, body))
    assert current(client, kind, key_of(kind, body)).json()["current"] == body


# --- required fields ----------------------------------------------------------------------

COMMON_REQUIRED = [
    "timestamp",
    "source_platform_name",
    "source_store_type",
    "source_store_id",
    "source_platform_customer_id",
]
REQUIRED = {
    "coupon": [
        "id",
        "name",
        "url",
        "code",
        "is_redeemable",
        "status",
        "discount_type",
        "discount_value",
    ],
    "order": [
        "id",
        "status",
        "total_amount",
        "currency",
        "items",
        "payment_method",
        "delivery_method",
        "shipping_location",
    ],
    "order_fulfillment": ["order_id", "fulfillment_status", "shipping_location", "shipping_status"],
    "membership_tier": ["tier_id", "tier_name", "tier_status"],
    "point": ["balance", "type"],
    "reservation": [
        "id",
        "status",
        "start_at",
        "end_at",
        "description",
        "service_type",
        "service_id",
        "service_name",
    ],
}
REQUIRED_CASES = [(k, f) for k in KINDS for f in COMMON_REQUIRED + REQUIRED[k]]


@pytest.mark.parametrize(("kind", "field"), REQUIRED_CASES)
def test_required_field_missing_is_refused(client, kind, field):
    assert_refused(submit(client, kind, without(minimal(kind), field)), field)


@pytest.mark.parametrize(("kind", "field"), REQUIRED_CASES)
def test_required_field_null_is_refused(client, kind, field):
    assert_refused(submit(client, kind, minimal(kind, **{field: None})), field)


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_field_is_refused(client, kind):
    assert_refused(submit(client, kind, minimal(kind, loyalty_note="x")), "loyalty_note")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("content", [b"[]", b"{not json", b"", b'"order"'])
def test_body_that_is_not_an_object_is_refused(client, kind, content):
    answer = client.post(
        BASE["default"] + PATHS[kind],
        content=content,
        headers=APIKEY | {"content-type": "application/json"},
    )
    assert_refused(answer, "body")


# --- string lengths (the hub's field bounds) -------------------------------------------------

COMMON_LENGTHS = [
    ("source_platform_name", 1, 64),
    ("source_store_id", 1, 64),
    ("source_platform_customer_id", 1, 128),
    ("source_store_name", 0, 255),
    ("external_channel_id", 0, 128),
    ("external_member_id", 0, 128),
]
LENGTHS = {
    "coupon": [
        ("id", 1, 64),
        ("name", 1, 255),
        ("code", 1, 64),
        ("description", 0, 2000),
        ("source_status", 0, 255),
        ("source_discount_type", 0, 255),
    ],
    "order": [
        ("id", 1, 64),
        ("payment_method", 1, 255),
        ("delivery_method", 1, 255),
        ("shipping_location", 1, 255),
        ("source_status", 0, 255),
        ("description", 0, 2000),
        ("store_description", 0, 1000),
        ("shipping_address", 0, 500),
        ("coupon_id", 0, 64),
        ("promotion_name", 0, 255),
        ("promotion_id", 0, 64),
        ("payment_transaction_id", 0, 128),
        ("payment_provider", 0, 64),
        ("pickup_store_id", 0, 64),
        ("pickup_store_name", 0, 255),
    ],
    "order_fulfillment": [
        ("order_id", 1, 64),
        ("shipping_location", 1, 255),
        ("fulfillment_source_status", 0, 255),
        ("shipping_source_status", 0, 255),
        ("delivery_method", 0, 255),
        ("shipping_address", 0, 500),
        ("shipping_carrier", 0, 128),
        ("shipping_tracking_id", 0, 128),
        ("pickup_store_id", 0, 64),
        ("pickup_store_name", 0, 255),
    ],
    "membership_tier": [
        ("tier_id", 1, 64),
        ("tier_name", 1, 255),
        ("tier_description", 0, 2000),
        ("tier_source_status", 0, 255),
    ],
    "point": [],
    "reservation": [
        ("id", 1, 64),
        ("description", 1, 2000),
        ("service_type", 1, 128),
        ("service_id", 1, 64),
        ("service_name", 1, 255),
        ("source_status", 0, 255),
        ("address", 0, 500),
        ("staff_id", 0, 64),
        ("staff_name", 0, 255),
    ],
}
LENGTH_CASES = [(k, *case) for k in KINDS for case in COMMON_LENGTHS + LENGTHS[k]]


@pytest.mark.parametrize(("kind", "field", "low", "high"), LENGTH_CASES)
def test_length_upper_bound(client, kind, field, low, high):
    assert_accepted(submit(client, kind, minimal(kind, **{field: chars(high)})))
    assert_refused(submit(client, kind, minimal(kind, **{field: chars(high + 1)})), field)


@pytest.mark.parametrize(("kind", "field", "low", "high"), LENGTH_CASES)
def test_length_lower_bound(client, kind, field, low, high):
    assert_accepted(submit(client, kind, minimal(kind, **{field: chars(max(low, 1))})))
    if low == 1:
        assert_refused(submit(client, kind, minimal(kind, **{field: ""})), field)
    else:  # "string or null, max N": empty and null both accepted
        assert_accepted(submit(client, kind, minimal(kind, **{field: ""})))
        assert_accepted(submit(client, kind, minimal(kind, **{field: None})))


@pytest.mark.parametrize(("kind", "field"), [(k, f) for k, f, *_ in LENGTH_CASES])
def test_string_field_refuses_a_number(client, kind, field):
    assert_refused(submit(client, kind, minimal(kind, **{field: 12345})), field)


# --- enums -----------------------------------------------------------------------------------

COMMON_ENUMS = [
    ("source_store_type", ["online_store", "offline_store"]),
    ("channel_type", ["line", "fb", "ig", "whatsapp", "email", "wccs", "others"]),
]
ENUMS = {
    "coupon": [
        (
            "status",
            ["active", "scheduled", "redeemed", "expired", "inactive", "revoked", "unknown"],
        ),
        ("discount_type", ["percentage", "fixed_amount", "free_shipping"]),
    ],
    "order": [
        (
            "status",
            ["created", "confirmed", "processing", "completed", "cancelled", "returned", "unknown"],
        )
    ],
    "order_fulfillment": [
        (
            "fulfillment_status",
            ["unfulfilled", "partially_fulfilled", "fulfilled", "cancelled", "returned", "unknown"],
        ),
        (
            "shipping_status",
            [
                "pending",
                "label_created",
                "in_transit",
                "out_for_delivery",
                "delivered",
                "delivery_failed",
                "exception",
                "returned_to_sender",
                "unknown",
            ],
        ),
    ],
    "membership_tier": [
        (
            "tier_status",
            ["active", "grace_period", "expired", "suspended", "cancelled", "pending", "unknown"],
        )
    ],
    "point": [("type", ["loyalty_point", "store_credit"])],
    "reservation": [
        (
            "status",
            [
                "scheduled",
                "confirmed",
                "checked_in",
                "completed",
                "cancelled",
                "no_show",
                "rescheduled",
                "unknown",
            ],
        )
    ],
}
ENUM_CASES = [(k, *case) for k in KINDS for case in COMMON_ENUMS + ENUMS[k]]


@pytest.mark.parametrize(("kind", "field", "values"), ENUM_CASES)
def test_enum_accepts_every_listed_value(client, kind, field, values):
    for value in values:
        assert_accepted(submit(client, kind, minimal(kind, **{field: value})))


@pytest.mark.parametrize(("kind", "field", "values"), ENUM_CASES)
@pytest.mark.parametrize("bad", ["bogus", "ACTIVE_", ""])
def test_enum_refuses_unlisted_value(client, kind, field, values, bad):
    assert_refused(submit(client, kind, minimal(kind, **{field: bad})), field)


@pytest.mark.parametrize("kind", KINDS)
def test_channel_type_is_case_sensitive_internal_value(client, kind):
    assert_refused(submit(client, kind, minimal(kind, channel_type="LINE")), "channel_type")


# --- date-times, dates, uris, numbers, booleans, currencies ------------------------------------

DATE_TIMES = [(k, "timestamp") for k in KINDS] + [
    ("coupon", "valid_from"),
    ("coupon", "valid_to"),
    ("order_fulfillment", "shipped_at"),
    ("order_fulfillment", "delivered_at"),
    ("membership_tier", "tier_effective_from"),
    ("membership_tier", "tier_expiry_at"),
    ("membership_tier", "lifetime_spend_updated_at"),
    ("point", "expiry_at"),
    ("reservation", "start_at"),
    ("reservation", "end_at"),
]


@pytest.mark.parametrize(("kind", "field"), DATE_TIMES)
@pytest.mark.parametrize(
    "bad",
    [
        "2026-10-01T09:30:00",
        "2026-10-01",
        "1700000000",
        1700000000,
        "yesterday",
        "2026-13-01T00:00:00Z",
    ],
)
def test_date_time_without_timezone_or_not_iso_is_refused(client, kind, field, bad):
    assert_refused(submit(client, kind, minimal(kind, **{field: bad})), field)


@pytest.mark.parametrize(("kind", "field"), DATE_TIMES)
def test_date_time_with_offset_is_kept_in_utc(client, kind, field):
    body = minimal(kind, **{field: "2026-10-01T18:30:00.250+09:00"})
    assert_accepted(submit(client, kind, body))
    stored = current(client, kind, key_of(kind, body)).json()["current"]
    assert stored[field] == "2026-10-01T09:30:00+00:00"


@pytest.mark.parametrize("good", ["2026-11-03", "2028-02-29"])
def test_estimated_delivery_date_accepts_a_date(client, good):
    body = minimal("order_fulfillment", estimated_delivery_date=good)
    assert_accepted(submit(client, "order_fulfillment", body))


@pytest.mark.parametrize(
    "bad", ["2026/11/03", "2026-11-3", "2026-02-30", "2026-11-03T00:00:00Z", 20261103, "soon"]
)
def test_estimated_delivery_date_format_is_enforced(client, bad):
    body = minimal("order_fulfillment", estimated_delivery_date=bad)
    assert_refused(submit(client, "order_fulfillment", body), "estimated_delivery_date")


URIS = [("coupon", "url"), ("order_fulfillment", "shipping_tracking_url")]


@pytest.mark.parametrize(("kind", "field"), URIS)
def test_uri_length_bounds(client, kind, field):
    prefix = "https://shop.example/"
    longest = prefix + "a" * (2083 - len(prefix))
    assert_accepted(submit(client, kind, minimal(kind, **{field: longest})))
    assert_refused(submit(client, kind, minimal(kind, **{field: longest + "a"})), field)
    assert_refused(submit(client, kind, minimal(kind, **{field: ""})), field)


@pytest.mark.parametrize(("kind", "field"), URIS)
@pytest.mark.parametrize(
    "bad",
    [
        "not a url",
        "shop.example/x",
        "/coupons/1",
        "ftp://shop.example/x",
        "https://",
        "https://shop example/x",
        "mailto:a@b.example",
    ],
)
def test_uri_must_be_an_absolute_http_url(client, kind, field, bad):
    assert_refused(submit(client, kind, minimal(kind, **{field: bad})), field)


NUMBERS = [
    ("coupon", "discount_value"),
    ("order", "total_amount"),
    ("order", "subtotal_amount"),
    ("order", "total_discount"),
    ("order", "shipping_amount"),
    ("order", "tax_amount"),
    ("order", "paid_amount"),
    ("membership_tier", "lifetime_spend_amount"),
    ("membership_tier", "tier_spend_amount"),
    ("point", "balance"),
]


@pytest.mark.parametrize(("kind", "field"), NUMBERS)
@pytest.mark.parametrize("good", [0, 12, -3.5, 1e9])
def test_number_field_accepts_json_numbers(client, kind, field, good):
    assert_accepted(submit(client, kind, minimal(kind, **{field: good})))


@pytest.mark.parametrize(("kind", "field"), NUMBERS)
@pytest.mark.parametrize("bad", ["12", True, [1], {"amount": 1}])
def test_number_field_refuses_non_numbers(client, kind, field, bad):
    assert_refused(submit(client, kind, minimal(kind, **{field: bad})), field)


@pytest.mark.parametrize(("kind", "field"), NUMBERS)
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_number_field_refuses_non_finite(client, kind, field, literal):
    text = json.dumps(minimal(kind, **{field: "@@"})).replace('"@@"', literal)
    answer = client.post(
        BASE["default"] + PATHS[kind],
        content=text.encode(),
        headers=APIKEY | {"content-type": "application/json"},
    )
    assert_refused(answer, field)


@pytest.mark.parametrize("good", [True, False])
def test_is_redeemable_accepts_booleans(client, good):
    assert_accepted(submit(client, "coupon", minimal("coupon", is_redeemable=good)))


@pytest.mark.parametrize("bad", ["yes", "true", 1, 0])
def test_is_redeemable_must_be_a_json_boolean(client, bad):
    answer = submit(client, "coupon", minimal("coupon", is_redeemable=bad))
    assert_refused(answer, "is_redeemable")


@pytest.mark.parametrize(
    ("value", "ok"),
    [("USD", True), ("US", False), ("USDX", False), ("usd", False), ("", False), ("U$D", False)],
)
def test_order_currency_is_three_letters(client, value, ok):
    answer = submit(client, "order", minimal("order", currency=value))
    if ok:
        assert_accepted(answer)
    else:
        assert_refused(answer, "currency")


@pytest.mark.parametrize("kind", ["membership_tier", "point"])
@pytest.mark.parametrize(
    ("value", "ok"), [("JPY", True), (None, True), ("JP", False), ("JPYX", False), ("jpy", False)]
)
def test_nullable_currency_is_three_letters_or_null(client, kind, value, ok):
    answer = submit(client, kind, minimal(kind, currency=value))
    if ok:
        assert_accepted(answer)
    else:
        assert_refused(answer, "currency")


# --- coupon id arrays -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "most"),
    [
        ("applicable_store_ids", 100),
        ("applicable_item_ids", 500),
        ("applicable_item_category_ids", 200),
    ],
)
def test_coupon_id_array_bounds(client, field, most):
    full = [f"id-{i}" for i in range(most)]
    assert_accepted(submit(client, "coupon", minimal("coupon", **{field: full})))
    assert_refused(submit(client, "coupon", minimal("coupon", **{field: [*full, "x"]})), field)
    assert_accepted(submit(client, "coupon", minimal("coupon", **{field: ["a" * 64]})))
    answer = submit(client, "coupon", minimal("coupon", **{field: ["ok", "a" * 65]}))
    assert_refused(answer, f"{field}.1")
    assert_refused(submit(client, "coupon", minimal("coupon", **{field: [7]})), f"{field}.0")
    assert_accepted(submit(client, "coupon", minimal("coupon", **{field: None})))


# --- order items ------------------------------------------------------------------------------


@pytest.mark.parametrize(("count", "ok"), [(0, False), (1, True), (200, True), (201, False)])
def test_order_items_count_bounds(client, count, ok):
    items = [ITEM | {"id": f"sku-{i}"} for i in range(count)]
    answer = submit(client, "order", minimal("order", items=items))
    if ok:
        assert_accepted(answer)
    else:
        assert_refused(answer, "items")


@pytest.mark.parametrize("field", ["id", "name", "price", "count"])
def test_order_item_required_fields(client, field):
    items = [dict(ITEM), without(ITEM, field)]
    assert_refused(submit(client, "order", minimal("order", items=items)), f"items.1.{field}")


@pytest.mark.parametrize(
    ("field", "low", "high"),
    [
        ("id", 1, 64),
        ("name", 1, 255),
        ("category", 0, 255),
        ("variant", 0, 255),
        ("coupon_id", 0, 64),
    ],
)
def test_order_item_length_bounds(client, field, low, high):
    def order(value):
        return minimal("order", items=[ITEM | {field: value}])

    assert_accepted(submit(client, "order", order("a" * high)))
    assert_refused(submit(client, "order", order("a" * (high + 1))), f"items.0.{field}")
    if low == 1:
        assert_refused(submit(client, "order", order("")), f"items.0.{field}")
    else:
        assert_accepted(submit(client, "order", order("")))
        assert_accepted(submit(client, "order", order(None)))


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [
        ("price", 0, True),
        ("price", -0.01, False),
        ("price", "39.9", False),
        ("count", 1, True),
        ("count", 0, False),
        ("count", 1.5, False),
        ("count", "2", False),
        ("discount", 0, True),
        ("discount", -1, False),
        ("discount", None, True),
    ],
)
def test_order_item_number_bounds(client, field, value, ok):
    answer = submit(client, "order", minimal("order", items=[ITEM | {field: value}]))
    if ok:
        assert_accepted(answer)
    else:
        assert_refused(answer, f"items.0.{field}")


def test_order_item_unknown_field_is_refused(client):
    answer = submit(client, "order", minimal("order", items=[ITEM | {"sku": "x"}]))
    assert_refused(answer, "items.0.sku")


# --- authentication ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", [*PATHS.values(), BEHAVIOR_PATH])
@pytest.mark.parametrize("headers", [{}, {"apikey": "wrong"}, {"Authorization": "demo-apikey"}])
def test_every_operation_needs_the_apikey_header(client, path, headers):
    answer = client.post(BASE["default"] + path, json={}, headers=headers)
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("kind", KINDS)
def test_refused_submission_is_not_stored(client, kind):
    body = minimal(kind)
    assert submit(client, kind, body, headers={}).status_code == 401
    assert_refused(submit(client, kind, body | {"timestamp": "2026-10-01"}), "timestamp")
    assert current(client, kind, key_of(kind, body)).status_code == 404


# --- latest-timestamp semantics -----------------------------------------------------------------

VARIANT_FIELD = {  # a field that tells the versions apart
    "coupon": "name",
    "order": "payment_method",
    "order_fulfillment": "shipping_location",
    "membership_tier": "tier_name",
    "point": "source_store_id",
    "reservation": "service_name",
}


def versions(kind: str, stamps: list[str]) -> list[dict]:
    first = minimal(kind)
    field = VARIANT_FIELD[kind]
    return [first | {"timestamp": stamp, field: f"v{i}"} for i, stamp in enumerate(stamps)]


@pytest.mark.parametrize("kind", KINDS)
def test_latest_timestamp_wins_whatever_the_arrival_order(client, kind):
    t1, t3, t2 = versions(
        kind,
        ["2026-10-01T01:00:00+00:00", "2026-10-03T01:00:00+00:00", "2026-10-02T01:00:00+00:00"],
    )
    ids = [assert_accepted(submit(client, kind, body)) for body in (t1, t3, t2)]
    found = current(client, kind, key_of(kind, t1)).json()
    assert found["current"] == t3
    assert found["event_id"] == ids[1]
    assert found["submissions"] == 3


@pytest.mark.parametrize("kind", KINDS)
def test_equal_timestamps_the_later_arrival_wins(client, kind):
    first, second = versions(kind, ["2026-10-01T01:00:00+00:00", "2026-10-01T10:00:00+09:00"])
    assert_accepted(submit(client, kind, first))
    event_id = assert_accepted(submit(client, kind, second))
    found = current(client, kind, key_of(kind, first)).json()
    assert found["current"][VARIANT_FIELD[kind]] == "v1"
    assert found["event_id"] == event_id


def test_timestamps_compare_as_instants_not_as_text(client):
    # 10:00+09:00 is 01:00 UTC: earlier than 02:00 UTC although it sorts later as text.
    early_text, late_text = versions(
        "order", ["2026-10-01T02:00:00+00:00", "2026-10-01T10:00:00+09:00"]
    )
    assert_accepted(submit(client, "order", early_text))
    assert_accepted(submit(client, "order", late_text))
    found = current(client, "order", key_of("order", early_text)).json()
    assert found["current"]["payment_method"] == "v0"


def test_sub_second_timestamps_order_the_versions(client):
    later, earlier = versions(
        "point", ["2026-10-01T01:00:00.900+00:00", "2026-10-01T01:00:00.100+00:00"]
    )
    assert_accepted(submit(client, "point", later))
    assert_accepted(submit(client, "point", earlier))
    found = current(client, "point", key_of("point", later)).json()
    assert found["current"]["source_store_id"] == "v0"


def test_membership_tier_key_is_customer_and_tier(client):
    customer = fresh("cust")
    gold = minimal("membership_tier", source_platform_customer_id=customer)
    silver = gold | {"tier_id": "silver", "tier_name": "Silver"}
    other = gold | {"source_platform_customer_id": fresh("cust")}
    for body in (gold, silver, other):
        assert_accepted(submit(client, "membership_tier", body))
    assert current(client, "membership_tier", f"{customer}:gold").json()["current"] == gold
    assert current(client, "membership_tier", f"{customer}:silver").json()["current"] == silver
    assert current(client, "membership_tier", f"{customer}:gold").json()["submissions"] == 1


def test_point_key_is_customer_and_type(client):
    customer = fresh("cust")
    loyalty = minimal("point", source_platform_customer_id=customer, balance=10)
    credit = loyalty | {"type": "store_credit", "balance": 25.5, "currency": "USD"}
    assert_accepted(submit(client, "point", loyalty))
    assert_accepted(submit(client, "point", credit))
    assert current(client, "point", f"{customer}:loyalty_point").json()["current"] == loyalty
    assert current(client, "point", f"{customer}:store_credit").json()["current"] == credit


def test_reservation_key_is_customer_and_id(client):
    first = minimal("reservation", id="rsv-shared")
    second = minimal("reservation", id="rsv-shared")  # another customer, same id
    assert_accepted(submit(client, "reservation", first))
    assert_accepted(submit(client, "reservation", second))
    for body in (first, second):
        found = current(client, "reservation", key_of("reservation", body)).json()
        assert found["current"] == body
        assert found["submissions"] == 1


@pytest.mark.parametrize("kind", ["coupon", "order", "order_fulfillment"])
def test_single_id_keys_ignore_the_customer(client, kind):
    first = minimal(kind)
    id_field = "order_id" if kind == "order_fulfillment" else "id"
    second = minimal(kind, timestamp="2026-10-05T00:00:00+00:00", **{id_field: first[id_field]})
    assert second["source_platform_customer_id"] != first["source_platform_customer_id"]
    assert_accepted(submit(client, kind, first))
    assert_accepted(submit(client, kind, second))
    found = current(client, kind, key_of(kind, first)).json()
    assert found["current"] == second
    assert found["submissions"] == 2


# --- the ground-truth routes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/_sandbox/records/order/no-such-order", {}),
        ("/_sandbox/records/invoice/anything", {}),
        ("/_sandbox/records/order/anything", {"region": "eu"}),
    ],
)
def test_unknown_record_type_key_or_region_is_404(client, path, params):
    assert client.get(path, params=params).status_code == 404


def test_regions_are_independent(client):
    in_jp = minimal("order")
    in_default = in_jp | {"payment_method": "cash"}
    assert_accepted(submit(client, "order", in_jp, region="jp"))
    key = key_of("order", in_jp)
    assert current(client, "order", key, "default").status_code == 404
    assert current(client, "order", key, "jp").json()["current"] == in_jp
    assert_accepted(submit(client, "order", in_default, region="default"))
    assert current(client, "order", key, "default").json()["current"] == in_default
    assert current(client, "order", key, "jp").json()["submissions"] == 1


@pytest.fixture
def own_app(make_sandbox):
    """A sandbox of its own, for tests that look at everything a store holds."""
    app = make_sandbox(rate_limits=False)
    with TestClient(app, base_url="http://sandbox") as c:
        yield app, c


def test_submissions_lists_every_accepted_submission_in_arrival_order(own_app):
    app, c = own_app
    bodies = versions("coupon", ["2026-10-02T00:00:00+00:00", "2026-10-01T00:00:00+00:00"])
    ids = [assert_accepted(submit(c, "coupon", body)) for body in bodies]
    submit(c, "coupon", bodies[0] | {"status": "bogus"})  # refused: not stored
    store = app.services[("datahub", "default")].records
    listed = store.submissions("coupon")
    assert [s["event_id"] for s in listed] == ids
    assert [s["record"] for s in listed] == bodies
    assert all(s["received_at"] == RECEIVED_AT for s in listed)
    assert store.submissions("order") == []


def test_admin_routes_list_current_states_and_behavior_counts(own_app):
    app, c = own_app
    store = app.services[("datahub", "jp")].records
    first, second = versions("order", ["2026-10-02T00:00:00+00:00", "2026-10-01T00:00:00+00:00"])
    other = minimal("order")
    for body in (first, second, other):
        assert_accepted(submit(c, "order", body, region="jp"))
    for behavior in ("page_view", "page_view", "purchase"):
        body = behavior_event(behavior)
        assert_accepted(c.post(BASE["jp"] + BEHAVIOR_PATH, json=body, headers=APIKEY))
    admin = FastAPI()
    admin.include_router(records_admin(store), prefix="/_sandbox/datahub/jp")
    with TestClient(admin) as inspector:
        listed = inspector.get("/_sandbox/datahub/jp/records/order").json()
        assert {row["key"]: row["current"] for row in listed} == {
            key_of("order", first): first,
            key_of("order", other): other,
        }
        assert inspector.get("/_sandbox/datahub/jp/records/coupon").json() == []
        assert inspector.get("/_sandbox/datahub/jp/records/invoice").status_code == 404
        counts = inspector.get("/_sandbox/datahub/jp/behavior-events").json()
        assert counts == {"page_view": 2, "purchase": 1}
        stored = inspector.get("/_sandbox/datahub/jp/behavior-events/all").json()
        assert [row["event"] for row in stored] == [
            behavior_event(b) for b in ("page_view", "page_view", "purchase")
        ]
        assert len({row["event_id"] for row in stored}) == 3


def test_concurrent_submissions_keep_the_latest_and_count_all(own_app):
    app, _ = own_app
    store = app.services[("datahub", "default")].records
    kind = RECORD_TYPES["order"]
    base = minimal("order")
    bodies = [
        base | {"timestamp": f"2026-10-01T{h:02d}:{m:02d}:00+00:00", "payment_method": f"{h}"}
        for h in range(24)
        for m in range(0, 60, 10)
    ]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda b: store.submit(kind, OrderRecord.model_validate(b)), bodies))
    found = store.current("order", base["id"])
    assert found["submissions"] == len(bodies)
    assert found["current"]["timestamp"] == "2026-10-01T23:50:00+00:00"
    assert len(store.submissions("order")) == len(bodies)


# --- behavior events ----------------------------------------------------------------------------

BEHAVIOR_ITEMS = [{"item_id": "sku-1", "item_name": "Linen shirt", "price": 39.9, "quantity": 1}]
PARAMS = {
    "page_view": {
        "page_path": "/shirts/linen",
        "page_title": "Linen shirt",
        "page_view_id": "pv-1",
    },
    "view_item": {"currency": "USD", "items": BEHAVIOR_ITEMS},
    "add_to_cart": {"currency": "USD", "items": BEHAVIOR_ITEMS},
    "remove_from_cart": {"currency": "USD", "items": BEHAVIOR_ITEMS},
    "begin_checkout": {"currency": "USD", "items": BEHAVIOR_ITEMS},
    "purchase": {
        "transaction_id": "tx-1",
        "revenue": 44.9,
        "tax": 2.1,
        "shipping": 5,
        "currency": "USD",
        "items": BEHAVIOR_ITEMS,
    },
    "user_engagement": {"engagement_time_msec": 1500},
}
BEHAVIORS = list(PARAMS)


def behavior_event(behavior: str, **changes) -> dict:
    return {"behavior": behavior, "utm_term": "linen", "params": dict(PARAMS[behavior])} | changes


def send_behavior(client, body):
    return client.post(BASE["default"] + BEHAVIOR_PATH, json=body, headers=APIKEY)


@pytest.mark.parametrize("behavior", BEHAVIORS)
def test_behavior_event_is_accepted(client, behavior):
    body = behavior_event(
        behavior,
        utm_campaign="spring",
        utm_source="line",
        utm_medium="chat",
        utm_content="a",
        language="ja",
        geography="JP",
    )
    assert_accepted(send_behavior(client, body))


@pytest.mark.parametrize(("behavior", "field"), [(b, f) for b in BEHAVIORS for f in PARAMS[b]])
def test_behavior_params_required_by_behavior(client, behavior, field):
    body = behavior_event(behavior, params=without(PARAMS[behavior], field))
    assert_refused(send_behavior(client, body), f"params.{field}")


@pytest.mark.parametrize("behavior", BEHAVIORS)
def test_behavior_params_allow_extra_fields(client, behavior):
    params = PARAMS[behavior] | {"ab_variant": "b", "debug": {"x": 1}}
    assert_accepted(send_behavior(client, behavior_event(behavior, params=params)))


def test_user_engagement_page_view_id_is_optional(client):
    params = {"engagement_time_msec": 0, "page_view_id": "pv-9"}
    assert_accepted(send_behavior(client, behavior_event("user_engagement", params=params)))
    params = {"engagement_time_msec": 10, "page_view_id": None}
    assert_accepted(send_behavior(client, behavior_event("user_engagement", params=params)))


@pytest.mark.parametrize(
    ("behavior", "field", "good", "bad"),
    [
        ("page_view", "page_path", "/" + "p" * 2082, "/" + "p" * 2083),
        ("page_view", "page_path", "/", ""),
        ("page_view", "page_title", "t" * 1024, "t" * 1025),
        ("page_view", "page_title", "", 7),
        ("page_view", "page_view_id", "v" * 128, "v" * 129),
        ("page_view", "page_view_id", "v", ""),
        ("view_item", "currency", "EUR", "EURO"),
        ("add_to_cart", "currency", "JPY", "jp"),
        ("purchase", "transaction_id", "t" * 128, "t" * 129),
        ("purchase", "transaction_id", "t", ""),
        ("purchase", "revenue", 0, -1),
        ("purchase", "revenue", 10, "10"),
        ("purchase", "tax", 0, -0.5),
        ("purchase", "shipping", 0, -2),
        ("user_engagement", "engagement_time_msec", 0, -1),
        ("user_engagement", "engagement_time_msec", 10, 1.5),
        ("user_engagement", "engagement_time_msec", 10, "10"),
        ("user_engagement", "page_view_id", "v" * 128, "v" * 129),
        ("user_engagement", "page_view_id", "v", ""),
    ],
)
def test_behavior_param_bounds(client, behavior, field, good, bad):
    for value, ok in ((good, True), (bad, False)):
        params = PARAMS[behavior] | {field: value}
        answer = send_behavior(client, behavior_event(behavior, params=params))
        if ok:
            assert_accepted(answer)
        else:
            assert_refused(answer, f"params.{field}")


@pytest.mark.parametrize("behavior", ["view_item", "purchase"])
@pytest.mark.parametrize(("count", "ok"), [(0, False), (1, True), (200, True), (201, False)])
def test_behavior_items_count_bounds(client, behavior, count, ok):
    params = PARAMS[behavior] | {"items": BEHAVIOR_ITEMS * count}
    answer = send_behavior(client, behavior_event(behavior, params=params))
    if ok:
        assert_accepted(answer)
    else:
        assert_refused(answer, "params.items")


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        ("item_id", "i" * 64, "i" * 65),
        ("item_id", "i", ""),
        ("item_name", "n" * 255, "n" * 256),
        ("item_name", "n", ""),
        ("price", 0, -1),
        ("quantity", 1, 0),
        ("quantity", 3, 2.5),
    ],
)
def test_behavior_item_bounds(client, field, good, bad):
    for value, ok in ((good, True), (bad, False)):
        params = PARAMS["add_to_cart"] | {"items": [BEHAVIOR_ITEMS[0] | {field: value}]}
        answer = send_behavior(client, behavior_event("add_to_cart", params=params))
        if ok:
            assert_accepted(answer)
        else:
            assert_refused(answer, f"params.items.0.{field}")


@pytest.mark.parametrize("field", ["item_id", "item_name", "price", "quantity"])
def test_behavior_item_required_fields(client, field):
    params = PARAMS["purchase"] | {"items": [without(BEHAVIOR_ITEMS[0], field)]}
    answer = send_behavior(client, behavior_event("purchase", params=params))
    assert_refused(answer, f"params.items.0.{field}")


@pytest.mark.parametrize("field", ["behavior", "utm_term", "params"])
def test_behavior_event_required_fields(client, field):
    body = without(behavior_event("page_view"), field)
    assert_refused(send_behavior(client, body), field)
    assert_refused(send_behavior(client, behavior_event("page_view") | {field: None}), field)


def test_utm_term_may_be_empty(client):
    assert_accepted(send_behavior(client, behavior_event("page_view", utm_term="")))


@pytest.mark.parametrize("bad", ["click", "PAGE_VIEW", "", "x" * 257])
def test_unknown_behavior_is_refused(client, bad):
    assert_refused(
        send_behavior(client, behavior_event("page_view") | {"behavior": bad}), "behavior"
    )


@pytest.mark.parametrize(
    ("field", "low", "high"),
    [
        ("utm_campaign", 1, 256),
        ("utm_source", 1, 256),
        ("utm_medium", 1, 256),
        ("utm_content", 1, 256),
        ("utm_term", 0, 256),
        ("language", 0, 256),
        ("geography", 0, 256),
    ],
)
def test_behavior_text_bounds(client, field, low, high):
    def send(value):
        return send_behavior(client, behavior_event("page_view", **{field: value}))

    assert_accepted(send("u" * high))
    assert_refused(send("u" * (high + 1)), field)
    if low == 1:
        assert_accepted(send("u"))
        assert_refused(send(""), field)
    else:
        assert_accepted(send(""))


@pytest.mark.parametrize(
    "field", ["utm_campaign", "utm_source", "utm_medium", "utm_content", "language", "geography"]
)
def test_behavior_nullable_fields_accept_null(client, field):
    assert_accepted(send_behavior(client, behavior_event("page_view") | {field: None}))


@pytest.mark.parametrize("bad", [[], "page_view", 3])
def test_behavior_params_must_be_an_object(client, bad):
    assert_refused(send_behavior(client, behavior_event("page_view", params=bad)), "params")


def test_behavior_unknown_top_level_field_is_refused(client):
    answer = send_behavior(client, behavior_event("page_view", session="s1"))
    assert_refused(answer, "session")


# --- webhooks (signature, envelope, sync events) ------------------------------------------------

SECRET = "s3cret"
SOURCE = [
    "source_platform_name",
    "source_platform_customer_id",
    "source_store_type",
    "source_store_id",
]
SYNC = {  # event and data fields the hub documents
    "coupon": (
        "coupon.sync",
        ["id", "name", "code", "is_redeemable", "status", "discount_type", "discount_value"],
    ),
    "order": (
        "order.sync",
        [
            "id",
            "status",
            "total_amount",
            "currency",
            "items",
            "payment_method",
            "delivery_method",
            "shipping_location",
        ],
    ),
    "order_fulfillment": (
        "order_fulfillment.sync",
        [
            "order_id",
            "fulfillment_status",
            "shipping_location",
            "shipping_status",
            "estimated_delivery_date",
            "pickup_store_id",
        ],
    ),
    "membership_tier": (
        "membership.sync",
        [
            "tier_id",
            "tier_name",
            "tier_status",
            "tier_effective_from",
            "tier_expiry_at",
            "lifetime_spend_amount",
            "currency",
        ],
    ),
    "point": ("point.sync", ["balance", "type", "currency", "expiry_at"]),
    "reservation": (
        "reservation.sync",
        [
            "id",
            "status",
            "start_at",
            "end_at",
            "description",
            "service_type",
            "service_id",
            "service_name",
            "address",
            "staff_id",
            "staff_name",
        ],
    ),
}


class Receiver:
    """The client's webhook endpoint: records every delivery, answers 200."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.requests.append(request)
        return httpx.Response(200)

    def for_event_id(self, event_id: str) -> list[httpx.Request]:
        with self._lock:
            return [r for r in self.requests if json.loads(r.content).get("event_id") == event_id]


@pytest.fixture(scope="module")
def hooked():
    receiver = Receiver()
    config = SandboxConfig(
        frozen=True,
        now=ANCHOR,
        rate_limits=False,
        webhook_url="http://receiver/hook",
        webhook_secret=SECRET,
    )
    app = build_app(config, webhook_transport=httpx.MockTransport(receiver))
    with TestClient(app, base_url="http://sandbox") as c:
        yield app, c, receiver
    app.sandbox.webhooks.close()


def delivered(hooked, event_id: str) -> list[httpx.Request]:
    app, _, receiver = hooked
    assert app.sandbox.webhooks.wait_idle(10)
    return receiver.for_event_id(event_id)


def expected_data(kind: str, body: dict) -> dict:
    data = {name: body.get(name) for name in SYNC[kind][1] + SOURCE}
    if kind == "order":
        data["items"] = [
            {f: item.get(f) for f in ("id", "name", "price", "count", "category", "variant")}
            for item in body["items"]
        ]
    return data


@pytest.mark.parametrize("kind", KINDS)
def test_each_submission_sends_its_signed_sync_event(hooked, kind):
    _, c, _ = hooked
    body = minimal(kind, **FULL_EXTRAS[kind])
    event_id = assert_accepted(submit(c, kind, body))
    [request] = delivered(hooked, event_id)
    assert request.method == "POST"
    assert str(request.url) == "http://receiver/hook"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["service-idempotency-key"]
    assert request.headers["user-agent"]
    expected_signature = hmac.new(SECRET.encode(), request.content, hashlib.sha256).hexdigest()
    assert request.headers["service-signature"] == expected_signature
    envelope = json.loads(request.content)
    assert set(envelope) == {"event", "timestamp", "source", "event_id", "data"}
    assert envelope["event"] == SYNC[kind][0]
    assert envelope["timestamp"] == RECEIVED_AT
    assert envelope["source"] == "maac"
    assert envelope["data"] == expected_data(kind, body)


@pytest.mark.parametrize("kind", KINDS)
def test_sync_data_names_absent_optional_fields_as_null(hooked, kind):
    _, c, _ = hooked
    body = minimal(kind)
    [request] = delivered(hooked, assert_accepted(submit(c, kind, body)))
    assert json.loads(request.content)["data"] == expected_data(kind, body)


def test_order_sync_items_carry_only_the_listed_item_fields(hooked):
    _, c, _ = hooked
    body = minimal("order", items=[dict(ORDER_ITEM)])
    [request] = delivered(hooked, assert_accepted(submit(c, "order", body)))
    [item] = json.loads(request.content)["data"]["items"]
    assert item == {
        "id": "sku-1",
        "name": "Linen shirt",
        "price": 39.9,
        "count": 2,
        "category": "shirts",
        "variant": "M",
    }


def test_stale_submission_is_still_synchronized(hooked):
    app, c, _ = hooked
    newer, older = versions("order", ["2026-10-02T00:00:00+00:00", "2026-10-01T00:00:00+00:00"])
    assert_accepted(submit(c, "order", newer))
    stale_id = assert_accepted(submit(c, "order", older))
    [request] = delivered(hooked, stale_id)
    assert json.loads(request.content)["data"]["payment_method"] == "v1"
    found = current(c, "order", key_of("order", newer)).json()
    assert found["current"] == newer


def test_refused_submission_and_behavior_events_send_nothing(hooked):
    app, c, receiver = hooked
    app.sandbox.webhooks.wait_idle(10)
    before = len(receiver.requests)
    assert_refused(submit(c, "coupon", minimal("coupon", status="gone")), "status")
    for behavior in BEHAVIORS:
        assert_accepted(send_behavior(c, behavior_event(behavior)))
    assert app.sandbox.webhooks.wait_idle(10)
    assert len(receiver.requests) == before


# --- OpenAPI ------------------------------------------------------------------------------------


@pytest.mark.parametrize("region", ["default", "jp"])
def test_openapi_documents_every_operation(client, region):
    doc = client.get(BASE[region] + "/openapi.json").json()
    operations = {
        op["operationId"]: (path, method)
        for path, methods in doc["paths"].items()
        for method, op in methods.items()
    }
    expected = {f"submit_{kind}_record": (path, "post") for kind, path in PATHS.items()}
    expected["submit_behavior_event"] = (BEHAVIOR_PATH, "post")
    for operation_id, place in expected.items():
        assert operations[operation_id] == place
        op = doc["paths"][place[0]]["post"]
        assert op["requestBody"]["required"] is True
        ok = op["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok == {"$ref": "#/components/schemas/EventAccepted"}
    accepted = doc["components"]["schemas"]["EventAccepted"]
    assert accepted["properties"]["event_id"]["format"] == "uuid"
    order = doc["components"]["schemas"]["OrderRecord"]
    assert order["properties"]["items"]["maxItems"] == 200
    assert order["additionalProperties"] is False
