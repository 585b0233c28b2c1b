"""Client-side validation (pipelines/push/validation/) against the data hub sandbox's ground
truth: a valid row gives the body the sandbox accepts, and each side of every bound the hub
documents (fields, operations, limits) is refused by the client and the sandbox alike, naming
the same field.

Rows are what the `outbound` views yield: datetimes, dates, Decimals, lists of dicts, and
columns beyond the hub's fields. One sandbox serves the module: each case sends its own row.
"""

import copy
import json
import math
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, NamedTuple

import duckdb
import pytest
from starlette.testclient import TestClient

from pipelines.push.validation import (
    RECORD_TYPES,
    validate_import_row,
    validate_profile_update,
    validate_record,
)
from sandbox.app import build_app
from sandbox.config import SandboxConfig
from sandbox.datahub import records
from tests.conftest import ANCHOR
from tests.constants import APIKEY

DATAHUB = "/datahub"
PROFILE = f"{DATAHUB}/v1/contacts/profile"
IMPORT = f"{DATAHUB}/v1/members/import"
CUSTOM_FIELDS = f"{DATAHUB}/cdh/v1/custom-fields/"
MISSING = object()  # a case value: the column is absent from the row
VIEW_COLUMNS = ("event_key", "connection")  # outbound view columns that are not hub fields

PLUS8 = timezone(timedelta(hours=8))
TS = datetime(2026, 10, 30, 9, 15, 30, tzinfo=PLUS8)
LATER = TS + timedelta(days=30)

# -- valid rows carrying every field the hub documents ---------------------------------------

COMMON = {
    "timestamp": TS,
    "source_platform_name": "demo-shop",
    "source_store_type": "online_store",
    "source_store_id": "web-tw",
    "source_platform_customer_id": "cust-0001",
    "source_store_name": "Demo shop online",
    "channel_type": "line",
    "external_channel_id": "1656001001",
    "external_member_id": "U4af4980629",
    "event_key": "view-only column",
    "connection": "default",
}
ORDER_ITEM = {
    "id": "sku-1",
    "name": "Green tea",
    "price": Decimal("120.00"),
    "count": 2,
    "category": "drinks",
    "variant": "500ml",
    "discount": Decimal("0"),
    "coupon_id": None,
}
BEHAVIOR_ITEM = {
    "item_id": "sku-1",
    "item_name": "Green tea",
    "price": Decimal("120"),
    "quantity": 1,
    "brand": "Leaf",  # an extra param: the hub allows them
}
ITEM_PARAMS = {"currency": "TWD", "items": [BEHAVIOR_ITEM]}
PARAMS = {
    "page_view": {"page_path": "/tea", "page_title": "Tea", "page_view_id": "pv-1"},
    "view_item": ITEM_PARAMS,
    "add_to_cart": ITEM_PARAMS,
    "remove_from_cart": ITEM_PARAMS,
    "begin_checkout": ITEM_PARAMS,
    "purchase": ITEM_PARAMS
    | {"transaction_id": "ord-1", "revenue": Decimal("230.5"), "tax": 0, "shipping": 0},
    "user_engagement": {"engagement_time_msec": 5400, "page_view_id": "pv-1"},
}
BEHAVIOR = {
    "utm_campaign": "autumn",
    "utm_source": "line",
    "utm_medium": "message",
    "utm_content": None,
    "utm_term": "",
    "language": "zh-TW",
    "geography": "TW",
    "event_key": "view-only column",
}
ROWS: dict[str, dict] = {
    "coupon": COMMON
    | {
        "id": "cp-1",
        "name": "Autumn 15% off",
        "url": "https://shop.example/coupons/cp-1",
        "code": "AUTUMN15",
        "is_redeemable": True,
        "status": "active",
        "description": "15% off drinks",
        "source_status": "live",
        "valid_from": TS,
        "valid_to": LATER,
        "applicable_store_ids": ["web-tw"],
        "applicable_item_ids": ["sku-1", "sku-2"],
        "applicable_item_category_ids": [],
        "discount_type": "percentage",
        "source_discount_type": "pct",
        "discount_value": Decimal("15"),
    },
    "order": COMMON
    | {
        "id": "ord-1",
        "status": "completed",
        "total_amount": Decimal("230.50"),
        "currency": "TWD",
        "items": [ORDER_ITEM | {"sku_group": "tea"}],  # an item key beyond the hub's: dropped
        "payment_method": "credit_card",
        "delivery_method": "home_delivery",
        "shipping_location": "Taipei",
        "source_status": "paid",
        "description": None,
        "store_description": "Web store",
        "shipping_address": "1 Main St",
        "subtotal_amount": Decimal("240.00"),
        "total_discount": Decimal("9.50"),
        "shipping_amount": 0,
        "tax_amount": 0.0,
        "paid_amount": Decimal("230.50"),
        "coupon_id": "cp-1",
        "promotion_name": "Autumn",
        "promotion_id": "pr-1",
        "payment_transaction_id": "tx-1",
        "payment_provider": "stripe",
        "pickup_store_id": None,
        "pickup_store_name": None,
    },
    "order_fulfillment": COMMON
    | {
        "order_id": "ord-1",
        "fulfillment_status": "fulfilled",
        "shipping_location": "Taipei",
        "shipping_status": "delivered",
        "fulfillment_source_status": "done",
        "shipping_source_status": "ok",
        "delivery_method": "courier",
        "shipping_address": "1 Main St",
        "shipping_carrier": "Black Cat",
        "shipping_tracking_id": "BC123",
        "shipping_tracking_url": "https://track.example/BC123",
        "estimated_delivery_date": date(2026, 11, 2),
        "pickup_store_id": None,
        "pickup_store_name": None,
        "shipped_at": TS,
        "delivered_at": "2026-11-01T10:00:00+00:00",
    },
    "membership_tier": COMMON
    | {
        "tier_id": "gold",
        "tier_name": "Gold",
        "tier_status": "active",
        "tier_description": "Spend 10,000 a year",
        "tier_source_status": "GOLD",
        "tier_effective_from": TS,
        "tier_expiry_at": LATER,
        "currency": "TWD",
        "lifetime_spend_amount": Decimal("15200.5"),
        "lifetime_spend_updated_at": TS,
        "tier_spend_amount": 3200,
    },
    "point": COMMON
    | {"balance": Decimal("1250"), "type": "loyalty_point", "currency": None, "expiry_at": LATER},
    "reservation": COMMON
    | {
        "id": "rsv-1",
        "status": "confirmed",
        "start_at": LATER,
        "end_at": LATER + timedelta(hours=1),
        "description": "Facial",
        "service_type": "beauty",
        "service_id": "svc-1",
        "service_name": "Facial 60 min",
        "source_status": "booked",
        "address": "2 Side St",
        "staff_id": "st-1",
        "staff_name": "Amy",
    },
}
# A sample is a record type, or a behavior (its events differ by params).
SAMPLES: dict[str, tuple[str, dict]] = {name: (name, row) for name, row in ROWS.items()} | {
    behavior: ("behavior_event", BEHAVIOR | {"behavior": behavior, "params": params})
    for behavior, params in PARAMS.items()
}

COMMON_REQUIRED = (
    "timestamp",
    "source_platform_name",
    "source_store_type",
    "source_store_id",
    "source_platform_customer_id",
)
ITEM_PARAMS_REQUIRED = (
    "params.currency",
    "params.items",
    "params.items.0.item_id",
    "params.items.0.item_name",
    "params.items.0.price",
    "params.items.0.quantity",
)
BEHAVIOR_REQUIRED = ("behavior", "utm_term", "params")
REQUIRED: dict[str, tuple[str, ...]] = {
    "coupon": COMMON_REQUIRED
    + ("id", "name", "url", "code", "is_redeemable", "status", "discount_type", "discount_value"),
    "order": COMMON_REQUIRED
    + ("id", "status", "total_amount", "currency", "items", "payment_method")
    + ("delivery_method", "shipping_location")
    + ("items.0.id", "items.0.name", "items.0.price", "items.0.count"),
    "order_fulfillment": COMMON_REQUIRED
    + ("order_id", "fulfillment_status", "shipping_location", "shipping_status"),
    "membership_tier": COMMON_REQUIRED + ("tier_id", "tier_name", "tier_status"),
    "point": COMMON_REQUIRED + ("balance", "type"),
    "reservation": COMMON_REQUIRED
    + ("id", "status", "start_at", "end_at", "description", "service_type", "service_id")
    + ("service_name",),
    "page_view": BEHAVIOR_REQUIRED
    + ("params.page_path", "params.page_title", "params.page_view_id"),
    **{
        behavior: BEHAVIOR_REQUIRED + ITEM_PARAMS_REQUIRED
        for behavior in ("view_item", "add_to_cart", "remove_from_cart", "begin_checkout")
    },
    "purchase": BEHAVIOR_REQUIRED
    + ITEM_PARAMS_REQUIRED
    + ("params.transaction_id", "params.revenue", "params.tax", "params.shipping"),
    "user_engagement": BEHAVIOR_REQUIRED + ("params.engagement_time_msec",),
}
COMMERCE = tuple(ROWS)

# (path, low, high) of every bounded string; low 0 = "max N", empty allowed.
COMMON_STRINGS = (
    ("source_platform_name", 1, 64),
    ("source_store_id", 1, 64),
    ("source_platform_customer_id", 1, 128),
    ("source_store_name", 0, 255),
    ("external_channel_id", 0, 128),
    ("external_member_id", 0, 128),
)
STRINGS: dict[str, tuple[tuple[str, int, int], ...]] = {
    "coupon": (
        ("id", 1, 64),
        ("name", 1, 255),
        ("code", 1, 64),
        ("description", 0, 2000),
        ("source_status", 0, 255),
        ("source_discount_type", 0, 255),
    ),
    "order": (
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
        ("items.0.id", 1, 64),
        ("items.0.name", 1, 255),
        ("items.0.category", 0, 255),
        ("items.0.variant", 0, 255),
        ("items.0.coupon_id", 0, 64),
    ),
    "order_fulfillment": (
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
    ),
    "membership_tier": (
        ("tier_id", 1, 64),
        ("tier_name", 1, 255),
        ("tier_description", 0, 2000),
        ("tier_source_status", 0, 255),
    ),
    "reservation": (
        ("id", 1, 64),
        ("description", 1, 2000),
        ("service_type", 1, 128),
        ("service_id", 1, 64),
        ("service_name", 1, 255),
        ("source_status", 0, 255),
        ("address", 0, 500),
        ("staff_id", 0, 64),
        ("staff_name", 0, 255),
    ),
    "page_view": (
        ("utm_campaign", 1, 256),
        ("utm_source", 1, 256),
        ("utm_medium", 1, 256),
        ("utm_content", 1, 256),
        ("utm_term", 0, 256),
        ("language", 0, 256),
        ("geography", 0, 256),
        ("params.page_path", 1, 2083),
        ("params.page_title", 0, 1024),
        ("params.page_view_id", 1, 128),
    ),
    "purchase": (
        ("params.transaction_id", 1, 128),
        ("params.items.0.item_id", 1, 64),
        ("params.items.0.item_name", 1, 255),
    ),
    "user_engagement": (("params.page_view_id", 1, 128),),
}
ENUMS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "coupon": (
        (
            "status",
            ("active", "scheduled", "redeemed", "expired", "inactive", "revoked", "unknown"),
        ),
        ("discount_type", ("percentage", "fixed_amount", "free_shipping")),
    ),
    "order": (
        (
            "status",
            ("created", "confirmed", "processing", "completed", "cancelled", "returned", "unknown"),
        ),
    ),
    "order_fulfillment": (
        (
            "fulfillment_status",
            ("unfulfilled", "partially_fulfilled", "fulfilled", "cancelled", "returned", "unknown"),
        ),
        (
            "shipping_status",
            ("pending", "label_created", "in_transit", "out_for_delivery", "delivered")
            + ("delivery_failed", "exception", "returned_to_sender", "unknown"),
        ),
    ),
    "membership_tier": (
        (
            "tier_status",
            ("active", "grace_period", "expired", "suspended", "cancelled", "pending", "unknown"),
        ),
    ),
    "point": (("type", ("loyalty_point", "store_credit")),),
    "reservation": (
        (
            "status",
            ("scheduled", "confirmed", "checked_in", "completed", "cancelled", "no_show")
            + ("rescheduled", "unknown"),
        ),
    ),
}
COMMON_ENUMS = (
    ("source_store_type", ("online_store", "offline_store")),
    ("channel_type", ("line", "fb", "ig", "whatsapp", "email", "wccs", "others")),
)
# (path, minimum or None)
NUMBERS = {
    "coupon": (("discount_value", None),),
    "order": (
        ("total_amount", None),
        ("subtotal_amount", None),
        ("total_discount", None),
        ("shipping_amount", None),
        ("tax_amount", None),
        ("paid_amount", None),
        ("items.0.price", 0),  # item bounds: the sandbox's choice
        ("items.0.discount", 0),
    ),
    "membership_tier": (("lifetime_spend_amount", None), ("tier_spend_amount", None)),
    "point": (("balance", None),),
    "view_item": (("params.items.0.price", 0),),
    "purchase": (("params.revenue", 0), ("params.tax", 0), ("params.shipping", 0)),
}
WHOLE_NUMBERS = {
    "order": (("items.0.count", 1),),
    "view_item": (("params.items.0.quantity", 1),),
    "user_engagement": (("params.engagement_time_msec", 0),),
}
CURRENCIES = {
    "order": ("currency",),
    "membership_tier": ("currency",),
    "point": ("currency",),
    "view_item": ("params.currency",),
    "purchase": ("params.currency",),
}
DATE_TIMES = {
    "coupon": ("timestamp", "valid_from", "valid_to"),
    "order": ("timestamp",),
    "order_fulfillment": ("shipped_at", "delivered_at"),
    "membership_tier": ("tier_effective_from", "tier_expiry_at", "lifetime_spend_updated_at"),
    "point": ("expiry_at",),
    "reservation": ("start_at", "end_at"),
}
ID_ARRAYS = (
    ("applicable_store_ids", 100),
    ("applicable_item_ids", 500),
    ("applicable_item_category_ids", 200),
)
URIS = (("coupon", "url"), ("order_fulfillment", "shipping_tracking_url"))
ITEM_LISTS = (("order", "items", ORDER_ITEM), ("purchase", "params.items", BEHAVIOR_ITEM))


# -- helpers ---------------------------------------------------------------------------------


def as_json(value: Any) -> Any:
    """A row value the way JSON carries it (what the service receives)."""
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_json(item) for item in value]
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def sendable(value: Any) -> bool:
    """False for what JSON cannot carry (NaN, infinities)."""
    if isinstance(value, dict):
        return all(sendable(item) for item in value.values())
    if isinstance(value, list):
        return all(sendable(item) for item in value)
    if isinstance(value, float | Decimal):
        return math.isfinite(float(value))
    return True


def with_value(row: dict, path: str, value: Any) -> dict:
    """A copy of `row` with the dotted `path` set to `value`, or removed for MISSING."""
    changed = copy.deepcopy(row)
    *parents, last = path.split(".")
    target: Any = changed
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    key: Any = int(last) if isinstance(target, list) else last
    if value is MISSING:
        del target[key]
    else:
        target[key] = value
    return changed


def expected_body(row: dict) -> dict:
    """The body the hub's fields of `row` make: view columns and unknown item keys dropped."""
    body = {key: as_json(value) for key, value in row.items() if key not in VIEW_COLUMNS}
    if "items" in body:
        body["items"] = [
            {k: v for k, v in item.items() if k in ORDER_ITEM} for item in body["items"]
        ]
    if isinstance(body.get("params"), str):
        body["params"] = json.loads(body["params"])
    return body


def record_path(record_type: str) -> str:
    if record_type == "behavior_event":
        return DATAHUB + records.PATHS["submit_behavior_event"]
    return DATAHUB + records.PATHS[f"submit_{record_type}_record"]


def problem_fields(problems: list) -> list[str]:
    return [problem.field for problem in problems]


def assert_refused(answer, field: str) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["field"] == field


def label(value: Any) -> str:
    if value is MISSING:
        return "missing"
    if isinstance(value, str) and len(value) > 12:
        return f"{len(value)}chars"
    if isinstance(value, list) and len(value) > 2:
        return f"{len(value)}items"
    return repr(value)[:24]


class Case(NamedTuple):
    sample: str
    path: str
    value: Any
    refused_at: str | None  # the field both sides name; None: accepted


def case(sample: str, path: str, value: Any, refused: bool, field: str | None = None):
    refused_at = (field or path) if refused else None
    verdict = "refused" if refused else "ok"
    return pytest.param(
        Case(sample, path, value, refused_at), id=f"{sample}-{path}-{label(value)}-{verdict}"
    )


def string_cases() -> Iterator:
    bounds = STRINGS | {name: COMMON_STRINGS + STRINGS.get(name, ()) for name in COMMERCE}
    for sample, fields in bounds.items():
        for path, low, high in fields:
            yield case(sample, path, "", refused=low == 1)
            yield case(sample, path, "x" * high, refused=False)
            yield case(sample, path, "x" * (high + 1), refused=True)
    for sample, path in (
        ("coupon", "id"),
        ("order", "items.0.name"),
        ("page_view", "params.page_path"),
    ):
        yield case(sample, path, 42, refused=True)  # no coercion from numbers


def required_cases() -> Iterator:
    for sample, paths in REQUIRED.items():
        for path in paths:
            yield case(sample, path, MISSING, refused=True)
            yield case(sample, path, None, refused=True)


def enum_cases() -> Iterator:
    for sample in COMMERCE:
        for path, values in COMMON_ENUMS + ENUMS[sample]:
            for value in values:
                yield case(sample, path, value, refused=False)
            yield case(sample, path, values[0].upper(), refused=True)
    yield case("coupon", "channel_type", None, refused=False)
    yield case("page_view", "behavior", "click", refused=True)


def number_cases() -> Iterator:
    for sample, fields in NUMBERS.items():
        for path, minimum in fields:
            for value in (Decimal("12.34"), 7, 0.5):
                yield case(sample, path, value, refused=False)
            for value in ("12", True, math.nan, math.inf, Decimal("NaN"), Decimal("-Infinity")):
                yield case(sample, path, value, refused=True)
            if minimum is None:
                yield case(sample, path, -5, refused=False)
            else:
                yield case(sample, path, minimum, refused=False)
                yield case(sample, path, minimum - 0.01, refused=True)
    for sample, fields in WHOLE_NUMBERS.items():
        for path, minimum in fields:
            for value in (minimum, Decimal(minimum + 1), float(minimum + 2)):
                yield case(sample, path, value, refused=False)
            for value in (minimum - 1, 1.5, "3", True):
                yield case(sample, path, value, refused=True)
    for value in (False, True):
        yield case("coupon", "is_redeemable", value, refused=False)
    for value in ("true", 1):
        yield case("coupon", "is_redeemable", value, refused=True)


def currency_cases() -> Iterator:
    for sample, paths in CURRENCIES.items():
        for path in paths:
            yield case(sample, path, "JPY", refused=False)
            for value in ("usd", "US", "USDD", "U5D", 840):
                yield case(sample, path, value, refused=True)


def time_cases() -> Iterator:
    accepted = (
        datetime(2026, 10, 30, 1, 0, tzinfo=timezone(timedelta(hours=-5))),
        "2026-10-30T09:15:30Z",
        "2026-10-30T09:15:30.250+09:00",
        "2026-10-30 09:15:30+08",  # DuckDB's text of a TIMESTAMPTZ
        "2026-10-30 01:15:30.5+00",
        "2026-10-30 09:15:30+05:30",
        "20261030T091530Z",  # ISO 8601 basic format
    )
    refused = (
        datetime(2026, 10, 30, 9, 15),  # naive
        "2026-10-30T09:15:30",
        "2026-10-30 09:15:30",  # DuckDB's text of a naive TIMESTAMP
        date(2026, 10, 30),
        "1700000000",
        1700000000,
        "2026-02-30T10:00:00Z",
    )
    for sample, paths in DATE_TIMES.items():
        for path in paths:
            yield from (case(sample, path, value, refused=False) for value in accepted)
            yield from (case(sample, path, value, refused=True) for value in refused)
    path = "estimated_delivery_date"
    for value in (date(2026, 2, 28), "2026-11-02", None):
        yield case("order_fulfillment", path, value, refused=False)
    for value in ("2026-02-30", "2026/11/02", "20261102", TS):
        yield case("order_fulfillment", path, value, refused=True)


def list_cases() -> Iterator:
    for path, most in ID_ARRAYS:
        yield case("coupon", path, ["s"] * most, refused=False)
        yield case("coupon", path, ["s"] * (most + 1), refused=True)
        yield case("coupon", path, ["x" * 64], refused=False)
        yield case("coupon", path, ["x" * 65], refused=True, field=f"{path}.0")
        yield case("coupon", path, [5], refused=True, field=f"{path}.0")
        yield case("coupon", path, "web-tw", refused=True)
    for sample, path, item in ITEM_LISTS:
        yield case(sample, path, [item] * 200, refused=False)
        for value in ([], [item] * 201, "sku-1"):
            yield case(sample, path, value, refused=True)
        yield case(sample, path, [5], refused=True, field=f"{path}.0")


def uri_cases() -> Iterator:
    longest = "https://shop.example/" + "a" * (2083 - len("https://shop.example/"))
    for sample, path in URIS:
        for value in ("http://shop.example", longest):
            yield case(sample, path, value, refused=False)
        for value in (
            longest + "a",
            "",
            "ftp://shop.example/x",
            "/coupons/1",
            "https://",
            "https://shop.example/a b",
            "mailto:a@shop.example",
        ):
            yield case(sample, path, value, refused=True)


def behavior_cases() -> Iterator:
    yield case("page_view", "utm_source", None, refused=False)
    yield case("page_view", "params", "{not json", refused=True)
    yield case("page_view", "params", ["/tea"], refused=True)
    yield case("page_view", "params.referrer", "https://line.me", refused=False)  # extra
    yield case("user_engagement", "params.page_view_id", MISSING, refused=False)
    yield case("user_engagement", "params.page_view_id", None, refused=False)


CASES = [
    *string_cases(),
    *required_cases(),
    *enum_cases(),
    *number_cases(),
    *currency_cases(),
    *time_cases(),
    *list_cases(),
    *uri_cases(),
    *behavior_cases(),
]


@pytest.fixture(scope="module")
def hub() -> Iterator[TestClient]:
    """One frozen sandbox for the module, rate limits off: every case sends its own body."""
    app = build_app(SandboxConfig(frozen=True, now=ANCHOR, rate_limits=False))
    with TestClient(app, base_url="http://sandbox") as client:
        yield client
    app.sandbox.webhooks.close()


# -- commerce records and behavior events ----------------------------------------------------


def test_record_types_are_the_services_plus_behavior_events_and_conversation_writes():
    conversation = {"conversation_assignment", "conversation_close"}
    assert set(RECORD_TYPES) == {*records.RECORD_TYPES, "behavior_event", *conversation}
    with pytest.raises(ValueError, match="unknown record type"):
        validate_record("invoice", ROWS["order"])


@pytest.mark.parametrize(
    ("record_type", "row"),
    [
        *SAMPLES.values(),
        (
            "behavior_event",
            SAMPLES["purchase"][1] | {"params": json.dumps(as_json(PARAMS["purchase"]))},
        ),
    ],
    ids=[*SAMPLES, "purchase-params-as-json-text"],
)
def test_valid_row_gives_exactly_the_body_the_sandbox_accepts(hub, record_type, row):
    body, problems = validate_record(record_type, row)
    assert problems == []
    assert body == expected_body(row)
    json.dumps(body, allow_nan=False)  # JSON-ready
    answer = hub.post(record_path(record_type), headers=APIKEY, json=body)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("sample", SAMPLES)
@pytest.mark.parametrize("shape", ["required_only", "optional_null"])
def test_optional_fields_may_be_absent_or_null(hub, sample, shape):
    record_type, row = SAMPLES[sample]
    required = {path for path in REQUIRED[sample] if "." not in path}
    if shape == "required_only":
        row = {key: value for key, value in row.items() if key in required}
    else:
        row = {key: value if key in required else None for key, value in row.items()}
    body, problems = validate_record(record_type, row)
    assert problems == []
    assert set(body) == set(row) - set(VIEW_COLUMNS)
    answer = hub.post(record_path(record_type), headers=APIKEY, json=body)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("bound", CASES)
def test_client_and_sandbox_agree_on_every_bound(hub, bound: Case):
    record_type, valid = SAMPLES[bound.sample]
    body, problems = validate_record(record_type, with_value(valid, bound.path, bound.value))
    if bound.refused_at is None:
        assert problems == []
        answer = hub.post(record_path(record_type), headers=APIKEY, json=body)
        assert answer.status_code == 200, answer.text
        return
    assert body is None
    assert problem_fields(problems) == [bound.refused_at]
    assert all(problem.reason for problem in problems)
    if sendable(bound.value):
        valid_body, _ = validate_record(record_type, valid)
        sent = with_value(valid_body, bound.path, as_json(bound.value))
        assert_refused(
            hub.post(record_path(record_type), headers=APIKEY, json=sent), bound.refused_at
        )


def test_every_problem_of_a_row_is_reported_with_a_reason():
    row = ROWS["order"] | {
        "timestamp": datetime(2026, 10, 30, 9, 15),
        "currency": "usd",
        "items": [ORDER_ITEM | {"price": "120", "count": 0}],
        "connection": None,
    }
    del row["payment_method"]
    body, problems = validate_record("order", row)
    assert body is None
    assert {problem.field: problem.reason for problem in problems} == {
        "timestamp": "needs a timezone (ISO 8601 with offset)",
        "currency": "must be three capital letters (ISO 4217), e.g. USD",
        "items.0.price": "must be a number, not a string",
        "items.0.count": "must be at least 1",
        "payment_method": "is required",
    }


def test_behavior_params_are_checked_even_when_other_fields_fail():
    row = SAMPLES["purchase"][1] | {"utm_source": "", "params": PARAMS["purchase"] | {"tax": -1}}
    body, problems = validate_record("behavior_event", row)
    assert body is None
    assert problem_fields(problems) == ["utm_source", "params.tax"]


@pytest.mark.parametrize("extra", [math.nan, Decimal("Infinity")])
def test_params_extras_must_be_json_numbers(extra):
    row = SAMPLES["page_view"][1] | {"params": PARAMS["page_view"] | {"score": extra}}
    body, problems = validate_record("behavior_event", row)
    assert body is None
    assert problem_fields(problems) == ["params.score"]


def test_params_extras_become_json_values():
    extras = {"seen_at": TS, "day": date(2026, 10, 30), "weight": Decimal("1.5"), "tags": ("a",)}
    row = SAMPLES["page_view"][1] | {"params": PARAMS["page_view"] | extras}
    body, problems = validate_record("behavior_event", row)
    assert problems == []
    assert body["params"] == PARAMS["page_view"] | {
        "seen_at": "2026-10-30T09:15:30+08:00",
        "day": "2026-10-30",
        "weight": 1.5,
        "tags": ["a"],
    }


# -- profile updates -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def definitions(hub) -> list[dict]:
    """The custom field definitions as the pull lands them (archived ones included)."""
    answer = hub.get(CUSTOM_FIELDS, headers=APIKEY)
    return [field | {"connection": "default"} for field in answer.json()]


def first_line_contact(client: TestClient) -> dict:
    """A real contact of the sandbox, reachable by profile update (a LINE member)."""
    ids = client.get("/_sandbox/truth/datahub/default/members/ids").json()["ids"]
    for member_id in ids:
        found = client.get(f"/_sandbox/datahub/default/contacts/{member_id}").json()
        if found["channel_type"] == "line":
            return found
    raise AssertionError("the sandbox has no LINE contact")


@pytest.fixture(scope="module")
def line_contact(hub) -> dict:
    return first_line_contact(hub)


PROFILE_FIELDS = (
    "full_name",
    "display_name",
    "display_email",
    "display_mobile",
    "gender",
    "region",
    "city",
    "address",
    "company",
    "member_level",
    "customer_id",
    "connect_id",
)


def profile_row(contact: dict) -> dict:
    """A row of outbound.contact_profiles: identity, profile fields, custom field columns."""
    return {
        "channel_type": contact["channel_type"],
        "external_channel_id": contact["external_channel_id"],
        "external_member_id": contact["external_member_id"],
        "full_name": "Mei Lin",
        "display_name": "mei",
        "display_email": "mei.lin@shop.example",
        "display_mobile": "+886912345678",
        "gender": "female",
        "birthday": date(1990, 2, 28),
        "region": "tw",
        "city": "Taipei",
        "address": None,
        "company": "Leaf Tea Co.",
        "member_level": "gold",
        "customer_id": "C00001234",
        "connect_id": "cn_0001",
        "cl_custom_nickname": "Mei",
        "cl_custom_loyalty_points": Decimal("1250"),
        "cl_custom_anniversary": date(2024, 5, 1),
        "cl_custom_last_store_visit": TS,
        "cl_custom_preferred_store": "flagship",
        "cl_custom_skin_type": None,
        "member_id": contact["member_id"],  # view columns beyond the hub's fields
        "connection": "default",
    }


def test_profile_update_gives_the_body_the_sandbox_applies(http, definitions):
    contact = first_line_contact(http)
    row = profile_row(contact)
    body, problems = validate_profile_update(row, definitions)
    assert problems == []
    assert body == {
        "channel_type": "line",
        "external_channel_id": contact["external_channel_id"],
        "external_member_id": contact["external_member_id"],
        "data": {name: row[name] for name in PROFILE_FIELDS}
        | {
            "birthday": "1990-02-28",
            "custom_fields": {
                "cl_custom_nickname": "Mei",
                "cl_custom_loyalty_points": 1250.0,
                "cl_custom_anniversary": "2024-05-01",
                "cl_custom_last_store_visit": "2026-10-30T09:15:30+08:00",
                "cl_custom_preferred_store": "flagship",
                "cl_custom_skin_type": None,
            },
        },
    }
    answer = http.patch(PROFILE, headers=APIKEY, json=body)
    assert answer.status_code == 200, answer.text
    stored = http.get(f"/_sandbox/datahub/default/contacts/{contact['member_id']}").json()
    assert stored["birthday"] == "1990-02-28"
    assert stored["custom_fields"]["cl_custom_preferred_store"] == "flagship"


def test_profile_data_holds_only_the_fields_in_the_row(line_contact, definitions):
    row = {key: profile_row(line_contact)[key] for key in ("channel_type", "external_channel_id")}
    row |= {"external_member_id": line_contact["external_member_id"], "city": None}
    body, problems = validate_profile_update(row, definitions)
    assert problems == []
    assert body["data"] == {"city": None}  # null clears; no custom_fields key without columns


PROFILE_CASES = [
    # (column, value, refused at): predefined fields sit under `data`
    ("display_mobile", "+12345678", None),  # 8 digits
    ("display_mobile", "+123456789012345", None),  # 15 digits
    ("display_mobile", "+1234567", "data.display_mobile"),
    ("display_mobile", "+1234567890123456", "data.display_mobile"),
    ("display_mobile", "+0912345678", "data.display_mobile"),
    ("display_mobile", "0912345678", "data.display_mobile"),
    ("display_mobile", "+886 912 345 678", "data.display_mobile"),
    ("gender", "other", None),
    ("gender", "unknown", None),
    ("gender", "f", "data.gender"),
    ("birthday", "1992-02-29", None),
    ("birthday", "1990-02-29", "data.birthday"),
    ("birthday", "19900228", "data.birthday"),
    ("birthday", "1990-2-28", "data.birthday"),
    ("birthday", datetime(1990, 2, 28, tzinfo=PLUS8), "data.birthday"),
    ("full_name", None, None),
    ("full_name", 42, "data.full_name"),
    ("channel_type", "email", "channel_type"),  # a listed type, not one profile updates support
    ("channel_type", "others", "channel_type"),
    ("channel_type", "sms", "channel_type"),
    ("channel_type", MISSING, "channel_type"),
    ("external_channel_id", "", "external_channel_id"),
    ("external_channel_id", "x" * 129, "external_channel_id"),
    ("external_member_id", None, "external_member_id"),
    # custom fields, by type (the hub's value rules and bounds)
    ("cl_custom_nickname", "a" * 255, None),
    ("cl_custom_nickname", "a" * 256, "data.custom_fields.cl_custom_nickname"),
    ("cl_custom_nickname", 5, "data.custom_fields.cl_custom_nickname"),
    ("cl_custom_loyalty_points", 2147483647, None),
    ("cl_custom_loyalty_points", -2147483647, None),
    ("cl_custom_loyalty_points", 2147483648, "data.custom_fields.cl_custom_loyalty_points"),
    ("cl_custom_loyalty_points", -2147483648, "data.custom_fields.cl_custom_loyalty_points"),
    ("cl_custom_loyalty_points", 123456789.123456, None),  # 15 significant digits
    ("cl_custom_loyalty_points", Decimal("1234567.12345678"), None),
    ("cl_custom_loyalty_points", 1234567.123456789, "data.custom_fields.cl_custom_loyalty_points"),
    ("cl_custom_loyalty_points", True, "data.custom_fields.cl_custom_loyalty_points"),
    ("cl_custom_loyalty_points", "12", "data.custom_fields.cl_custom_loyalty_points"),
    ("cl_custom_loyalty_points", math.nan, "data.custom_fields.cl_custom_loyalty_points"),
    ("cl_custom_anniversary", "2026-02-28", None),
    ("cl_custom_anniversary", "2026-02-30", "data.custom_fields.cl_custom_anniversary"),
    ("cl_custom_anniversary", "2026/02/28", "data.custom_fields.cl_custom_anniversary"),
    ("cl_custom_anniversary", TS, "data.custom_fields.cl_custom_anniversary"),
    ("cl_custom_last_store_visit", "2026-02-28T10:00:00Z", None),
    (
        "cl_custom_last_store_visit",
        "2026-02-28T10:00:00",
        "data.custom_fields.cl_custom_last_store_visit",
    ),
    (
        "cl_custom_last_store_visit",
        datetime(2026, 2, 28, 10),
        "data.custom_fields.cl_custom_last_store_visit",
    ),
    (
        "cl_custom_last_store_visit",
        date(2026, 2, 28),
        "data.custom_fields.cl_custom_last_store_visit",
    ),
    ("cl_custom_preferred_store", "airport", None),
    ("cl_custom_preferred_store", None, None),  # null clears
    ("cl_custom_preferred_store", "Airport outlet", "data.custom_fields.cl_custom_preferred_store"),
    ("cl_custom_preferred_store", "old_town", "data.custom_fields.cl_custom_preferred_store"),
    ("cl_custom_preferred_store", ["airport"], "data.custom_fields.cl_custom_preferred_store"),
    ("cl_custom_legacy_segment", "vip", "data.custom_fields.cl_custom_legacy_segment"),
    ("cl_custom_legacy_segment", None, "data.custom_fields.cl_custom_legacy_segment"),
    ("cl_custom_shoe_size", "42", "data.custom_fields.cl_custom_shoe_size"),
]


@pytest.mark.parametrize(
    ("column", "value", "refused_at"),
    PROFILE_CASES,
    ids=[f"{c}-{label(v)}-{'refused' if r else 'ok'}" for c, v, r in PROFILE_CASES],
)
def test_client_and_sandbox_agree_on_profile_rules(
    hub, line_contact, definitions, column, value, refused_at
):
    valid = profile_row(line_contact)
    body, problems = validate_profile_update(with_value(valid, column, value), definitions)
    if refused_at is None:
        assert problems == []
        answer = hub.patch(PROFILE, headers=APIKEY, json=body)
        assert answer.status_code == 200, answer.text
        return
    assert body is None
    assert problem_fields(problems) == [refused_at]
    if sendable(value):
        valid_body, _ = validate_profile_update(valid, definitions)
        sent = with_value(valid_body, refused_at, as_json(value))
        assert_refused(hub.patch(PROFILE, headers=APIKEY, json=sent), refused_at)


def test_option_name_is_refused_with_the_key_to_send(line_contact, definitions):
    row = profile_row(line_contact) | {"cl_custom_preferred_store": "Flagship store"}
    _, problems = validate_profile_update(row, definitions)
    assert [problem.reason for problem in problems] == [
        "takes the option key, not its name: send 'flagship'"
    ]


# -- member imports --------------------------------------------------------------------------

IMPORT_ROW = {
    "line_uid": "U0000000000000000000000000000beef",
    "customer_id": "C99000001",
    "connect_id": "cn_import01",
    "full_name": "Kenji Sato",
    "display_name": "kenji",
    "display_email": "kenji.sato@shop.example",
    "display_mobile": "+819012345678",
    "gender": "male",
    "birthday": date(1985, 7, 14),
    "region": "jp",
    "city": "Osaka",
    "address": None,
    "company": None,
    "member_level": "silver",
    "connection": "default",  # a view column beyond the hub's fields
}
IMPORT_KEYS = ("line_uid", "display_email", "display_mobile", "connect_id", "customer_id")


def send_import(hub: TestClient, import_key: str, row: dict):
    return hub.post(IMPORT, headers=APIKEY, json={"import_key": import_key, "data": [row]})


@pytest.mark.parametrize("import_key", IMPORT_KEYS)
def test_import_row_gives_the_object_the_sandbox_accepts(hub, import_key):
    body, problems = validate_import_row(IMPORT_ROW, import_key)
    assert problems == []
    assert body == expected_body(IMPORT_ROW)
    answer = send_import(hub, import_key, body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["category"] == "import_member"


IMPORT_CASES = [
    # (import key, column, value, refused at)
    ("line_uid", "display_mobile", "+0912345678", "display_mobile"),
    ("line_uid", "display_mobile", None, None),  # null clears
    ("line_uid", "gender", "M", "gender"),
    ("line_uid", "birthday", "1985-02-29", "birthday"),
    ("line_uid", "full_name", 42, "full_name"),
    *((key, key, MISSING, key) for key in IMPORT_KEYS),
    *((key, key, None, key) for key in IMPORT_KEYS),
]


@pytest.mark.parametrize(
    ("import_key", "column", "value", "refused_at"),
    IMPORT_CASES,
    ids=[f"{k}-{c}-{label(v)}" for k, c, v, _ in IMPORT_CASES],
)
def test_client_and_sandbox_agree_on_import_rules(hub, import_key, column, value, refused_at):
    body, problems = validate_import_row(with_value(IMPORT_ROW, column, value), import_key)
    if refused_at is None:
        assert problems == []
        assert send_import(hub, import_key, body).status_code == 200
        return
    assert body is None
    assert problem_fields(problems) == [refused_at]
    sent = with_value(expected_body(IMPORT_ROW), column, as_json(value))
    assert_refused(send_import(hub, import_key, sent), f"data.0.{refused_at}")


def test_unknown_import_key_is_refused_by_both(hub):
    body, problems = validate_import_row(IMPORT_ROW, "member_id")
    assert body is None
    assert problem_fields(problems) == ["import_key"]
    assert_refused(send_import(hub, "member_id", expected_body(IMPORT_ROW)), "import_key")


@pytest.mark.parametrize(
    ("import_key", "column", "value"),
    [("customer_id", "customer_id", ""), ("line_uid", "display_email", "kenji at shop")],
)
def test_client_is_stricter_than_the_sandbox_on_empty_keys_and_email_shape(
    hub, import_key, column, value
):
    """Client-only rules (not the hub's): an empty import key matches nothing meaningful,
    and an email without local@domain.tld is refused; the sandbox accepts both."""
    row = with_value(IMPORT_ROW, column, value)
    body, problems = validate_import_row(row, import_key)
    assert body is None
    assert problem_fields(problems) == [column]
    assert send_import(hub, import_key, expected_body(row)).status_code == 200


def test_timestamps_a_view_casts_to_text_are_read_and_naive_ones_name_the_field():
    """A view that casts its timestamps to text had every row refused: DuckDB writes a
    TIMESTAMPTZ as `2026-10-30 09:15:30.25+08`, with a space and an hours-only offset."""
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'Asia/Taipei'")
        [(as_text, native, naive)] = con.execute(
            "SELECT TIMESTAMPTZ '2026-10-30 09:15:30.25+08'::VARCHAR, "
            "TIMESTAMPTZ '2026-10-30 09:15:30.25+08', TIMESTAMP '2026-10-30 09:15:30'::VARCHAR"
        ).fetchall()
    moment = TS + timedelta(milliseconds=250)
    for value in (as_text, native):
        body, problems = validate_record("order", ROWS["order"] | {"timestamp": value})
        assert problems == []
        assert datetime.fromisoformat(body["timestamp"]) == moment
    body, problems = validate_record("order", ROWS["order"] | {"timestamp": naive})
    assert body is None
    assert [(p.field, p.reason) for p in problems] == [
        ("timestamp", "needs a timezone (ISO 8601 with offset)")
    ]
