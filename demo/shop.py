"""The demo shop: a brand's own system, written to the lake for the examples in
`demo/sql/outbound/` to push to the data hub and the conversation service, so `make demo`
sends real data.

Its customers are the data hub members already pulled into the lake, plus some the hub has
never seen (for `member_imports`), so records and profile updates refer to real contacts.
The tables hold what a real source delivers and the push must cope with: several versions of
each record with the time of each state change, some versions out of order, exact
duplicates, one conflict per record type (same key and timestamp, different content), and a
handful of invalid rows, one of each kind the push must reject.

How the warehouse finds the tables: the product defines no `shop` stream, so
`{{ source('shop', 'orders') }}` in demo/sql/shop reads the Parquet files under
`<lake>/shop/orders/` (pipelines/warehouse/__init__.py), typed by the files. The lake is the only
registry: any process that builds the warehouse with `WAREHOUSE_SQL=demo/sql` (a sync, a
push in another process, a Dagster run) sees the tables without importing this module. The
tables must exist before the first such build, so `declare_shop` writes them empty until
`generate_shop` fills them (the shop's customers are pulled members: it runs after a sync).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from pipelines.lake import Lake, file_stem
from pipelines.stream import TIMESTAMP, Stream
from pipelines.streams.datahub import MEMBERS

if TYPE_CHECKING:
    from faker import Faker

SERVICE = "shop"
#: The file name: `<lake>/shop/<table>/shop.parquet`.
FILE = "shop"
#: The hub region the examples push to; its pulled members are the shop's customers.
HUB_CONNECTION = "default"
#: A fixed end, not today: the same seed gives the same tables on any day, so a second demo
#: run has nothing new to push.
HISTORY_END = datetime(2026, 11, 1, tzinfo=UTC)
HISTORY_START = HISTORY_END - timedelta(days=365)
#: Customers sign up early enough for their loyalty history to end by HISTORY_END.
LAST_SIGN_UP = HISTORY_END - timedelta(days=120)
NEW_CUSTOMER_SHARE = 0.2
CURRENCY = "TWD"
STRINGS = pa.list_(pa.string())


@dataclass(frozen=True)
class Store:
    id: str
    type: str  # source_store_type
    name: str
    platform: str  # source_platform_name
    city: str
    address: str | None


# The offline stores' ids are the option keys of the sandbox's `preferred_store` custom field.
STORES = (
    Store("web", "online_store", "Demo Beauty online", "demo-webshop", "Taipei", None),
    Store(
        "flagship",
        "offline_store",
        "Demo Beauty flagship",
        "demo-pos",
        "Taipei",
        "No. 8, Sec. 5, Xinyi Rd., Taipei",
    ),
    Store(
        "station_mall",
        "offline_store",
        "Demo Beauty station mall",
        "demo-pos",
        "Taichung",
        "No. 1, Taiwan Blvd. Sec. 1, Taichung",
    ),
    Store(
        "airport",
        "offline_store",
        "Demo Beauty airport",
        "demo-pos",
        "Taoyuan",
        "Terminal 2, Taoyuan International Airport",
    ),
)
WEB, OFFLINE = STORES[0], STORES[1:]
LOYALTY_PLATFORM = "demo-loyalty"
BOOKING_PLATFORM = "demo-booking"

# (id, name, category, price, variants)
PRODUCTS = (
    ("SKU-1001", "Hydrating Toner", "skincare", 680.0, ("150ml", "300ml")),
    ("SKU-1002", "Vitamin C Serum", "skincare", 1280.0, ("30ml", "50ml")),
    ("SKU-1003", "Gentle Cleanser", "skincare", 450.0, ("120ml",)),
    ("SKU-1004", "Night Repair Cream", "skincare", 1580.0, ("50ml",)),
    ("SKU-1005", "Sunscreen SPF50", "skincare", 720.0, ("50ml",)),
    ("SKU-2001", "Matte Lipstick", "makeup", 550.0, ("rose", "coral", "nude")),
    ("SKU-2002", "Cushion Foundation", "makeup", 980.0, ("light", "natural", "tan")),
    ("SKU-2003", "Volume Mascara", "makeup", 490.0, ("black", "brown")),
    ("SKU-2004", "Eyeshadow Palette", "makeup", 1350.0, ("warm", "cool")),
    ("SKU-3001", "Rose Body Lotion", "body", 620.0, ("200ml", "400ml")),
    ("SKU-3002", "Citrus Shower Gel", "body", 380.0, ("500ml",)),
    ("SKU-3003", "Shea Hand Cream", "body", 280.0, ("50ml",)),
    ("SKU-4001", "Travel Kit", "gift_set", 1680.0, (None,)),
    ("SKU-4002", "Holiday Box", "gift_set", 2480.0, (None,)),
)
CITIES = ("Taipei", "New Taipei", "Taichung", "Tainan", "Kaohsiung", "Hsinchu", "Taoyuan")
TIERS = ("bronze", "silver", "gold", "platinum")
#: The channel id the brand has for each channel type of the hub's default region (the
#: sandbox's, sandbox/datahub/contact_data.py). The hub's member export carries no
#: external_channel_id and the brand runs two LINE channels, so LINE customers have none: the
#: shop cannot tell which of the two they follow.
HUB_CHANNELS = {
    "fb": "104882710293847",
    "ig": "17841405822304914",
    "whatsapp": "886223456789",
    "wccs": "wccs-site-tw",
}
# Active options of the sandbox's custom fields (sandbox/datahub/custom_fields.py).
PREFERRED_STORES = tuple(store.id for store in OFFLINE)
SKIN_TYPES = ("dry", "oily", "combination", "sensitive")


# -- schemas ------------------------------------------------------------------------------


def _strings(*names: str) -> list[tuple[str, pa.DataType]]:
    return [(name, pa.string()) for name in names]


#: Common fields of every commerce record the hub takes, as the shop holds them; the
#: contact's channel fields come from `shop.customers` in the outbound views.
COMMON = [
    ("timestamp", TIMESTAMP),
    *_strings(
        "source_platform_name",
        "source_store_type",
        "source_store_id",
        "source_platform_customer_id",
        "source_store_name",
    ),
]
ORDER_ITEM = pa.struct(
    [
        *_strings("id", "name"),
        ("price", pa.float64()),
        ("count", pa.int64()),
        *_strings("category", "variant"),
        ("discount", pa.float64()),
        ("coupon_id", pa.string()),
    ]
)
AMOUNT = pa.float64()


def _versioned(name: str, key: tuple[str, ...], fields: list) -> Stream:
    # One row per version of a record: its key (sandbox/README.md, "record keys") and when
    # the state took effect. The planted duplicates and conflicts break this on purpose.
    return Stream(SERVICE, name, pa.schema(COMMON + fields), key=(*key, "timestamp"))


CUSTOMERS = Stream(
    SERVICE,
    "customers",
    pa.schema(
        [
            *_strings(
                "customer_id", "full_name", "display_name", "display_email", "display_mobile"
            ),
            ("gender", pa.string()),
            ("birthday", pa.date32()),
            *_strings("region", "city", "address", "line_uid"),
            *_strings("channel_type", "external_channel_id", "external_member_id"),
            ("signed_up_at", TIMESTAMP),
        ]
    ),
    key=("customer_id",),
)
COUPONS = _versioned(
    "coupons",
    ("id",),
    [
        *_strings("id", "name", "url", "code"),
        ("is_redeemable", pa.bool_()),
        *_strings("status", "description", "source_status"),
        ("valid_from", TIMESTAMP),
        ("valid_to", TIMESTAMP),
        ("applicable_store_ids", STRINGS),
        ("applicable_item_ids", STRINGS),
        ("applicable_item_category_ids", STRINGS),
        *_strings("discount_type", "source_discount_type"),
        ("discount_value", AMOUNT),
    ],
)
ORDERS = _versioned(
    "orders",
    ("id",),
    [
        *_strings("id", "status"),
        ("total_amount", AMOUNT),
        ("currency", pa.string()),
        ("items", pa.list_(ORDER_ITEM)),
        *_strings("payment_method", "delivery_method", "shipping_location", "source_status"),
        *_strings("description", "store_description", "shipping_address"),
        *((name, AMOUNT) for name in ("subtotal_amount", "total_discount", "shipping_amount")),
        ("tax_amount", AMOUNT),
        ("paid_amount", AMOUNT),
        *_strings("coupon_id", "promotion_name", "promotion_id", "payment_transaction_id"),
        *_strings("payment_provider", "pickup_store_id", "pickup_store_name"),
    ],
)
ORDER_FULFILLMENTS = _versioned(
    "order_fulfillments",
    ("order_id",),
    [
        *_strings("order_id", "fulfillment_status", "shipping_location", "shipping_status"),
        *_strings("fulfillment_source_status", "shipping_source_status", "delivery_method"),
        *_strings("shipping_address", "shipping_carrier", "shipping_tracking_id"),
        ("shipping_tracking_url", pa.string()),
        ("estimated_delivery_date", pa.date32()),
        *_strings("pickup_store_id", "pickup_store_name"),
        ("shipped_at", TIMESTAMP),
        ("delivered_at", TIMESTAMP),
    ],
)
MEMBERSHIP_TIERS = _versioned(
    "membership_tiers",
    ("source_platform_customer_id", "tier_id"),
    [
        *_strings("tier_id", "tier_name", "tier_status", "tier_description"),
        ("tier_source_status", pa.string()),
        ("tier_effective_from", TIMESTAMP),
        ("tier_expiry_at", TIMESTAMP),
        ("currency", pa.string()),
        ("lifetime_spend_amount", AMOUNT),
        ("lifetime_spend_updated_at", TIMESTAMP),
        ("tier_spend_amount", AMOUNT),
    ],
)
POINTS = _versioned(
    "points",
    ("source_platform_customer_id", "type"),
    [("balance", AMOUNT), *_strings("type", "currency"), ("expiry_at", TIMESTAMP)],
)
RESERVATIONS = _versioned(
    "reservations",
    ("source_platform_customer_id", "id"),
    [
        *_strings("id", "status"),
        ("start_at", TIMESTAMP),
        ("end_at", TIMESTAMP),
        *_strings("description", "service_type", "service_id", "service_name"),
        *_strings("source_status", "address", "staff_id", "staff_name"),
    ],
)
BEHAVIOR_EVENTS = Stream(
    SERVICE,
    "behavior_events",
    pa.schema(
        [
            # The tracker's id of the event: the push sends each event once per key.
            *_strings("event_key", "customer_id"),
            ("occurred_at", TIMESTAMP),
            *_strings("behavior", "utm_campaign", "utm_source", "utm_medium", "utm_content"),
            *_strings("utm_term", "language", "geography"),
            ("params", pa.string()),  # JSON object; its fields depend on `behavior`
        ]
    ),
    key=("event_key",),
)
CONTACT_CHANGES = Stream(
    SERVICE,
    "contact_changes",
    pa.schema(
        [
            ("customer_id", pa.string()),
            ("changed_at", TIMESTAMP),
            *_strings("member_level", "city"),
            ("birthday", pa.date32()),
            *_strings("gender", "display_mobile", "nickname"),
            ("loyalty_points", pa.int64()),
            ("anniversary", pa.date32()),
            ("last_store_visit", TIMESTAMP),
            *_strings("preferred_store", "skin_type"),
        ]
    ),
    key=("customer_id", "changed_at"),
)
#: The shop's customer service: a case per order that failed, open or resolved. The
#: conversation examples (demo/sql/outbound/conversation_*.sql) assign and close from it.
SUPPORT_CASES = Stream(
    SERVICE,
    "support_cases",
    pa.schema(
        [
            *_strings("case_id", "customer_id", "order_id", "reason", "status"),
            ("opened_at", TIMESTAMP),
            ("resolved_at", TIMESTAMP),
        ]
    ),
    key=("case_id",),
)
# Appended last: each table's generator is drawn by its position here.
SHOP_STREAMS: list[Stream] = [
    CUSTOMERS,
    COUPONS,
    ORDERS,
    ORDER_FULFILLMENTS,
    MEMBERSHIP_TIERS,
    POINTS,
    RESERVATIONS,
    BEHAVIOR_EVENTS,
    CONTACT_CHANGES,
    SUPPORT_CASES,
]


# -- helpers ------------------------------------------------------------------------------


def _at(rng: np.random.Generator, start: datetime, end: datetime) -> datetime:
    """A moment in [start, end), whole seconds."""
    seconds = max(int((end - start).total_seconds()), 1)
    return start + timedelta(seconds=int(rng.integers(seconds)))


def _after(rng: np.random.Generator, moment: datetime, low: timedelta, high: timedelta) -> datetime:
    return _at(rng, moment + low, moment + high)


def _begin(rng: np.random.Generator, customer: dict, time_to_end: timedelta) -> datetime:
    """When a record's first version happens: after sign-up, early enough that its last
    version (at most `time_to_end` later) is in the history."""
    return _at(rng, customer["signed_up_at"], HISTORY_END - time_to_end)


def _pick(rng: np.random.Generator, choices: tuple | list):
    return choices[int(rng.integers(len(choices)))]


def _path(rng: np.random.Generator, paths: tuple[tuple[tuple[str, ...], float], ...]):
    """One status sequence, drawn by its share."""
    shares = np.array([share for _, share in paths])
    return paths[int(rng.choice(len(paths), p=shares / shares.sum()))][0]


def _other(value, choices: tuple):
    return next(choice for choice in choices if choice != value)


def _common(store: Store, customer_id: str, at: datetime, platform: str | None = None) -> dict:
    return {
        "timestamp": at,
        "source_platform_name": platform or store.platform,
        "source_store_type": store.type,
        "source_store_id": store.id,
        "source_platform_customer_id": customer_id,
        "source_store_name": store.name,
    }


def _home_store(customer: dict) -> Store:
    # A stable store per customer, for the records that are not tied to a purchase.
    digest = hashlib.sha256(customer["customer_id"].encode()).digest()
    return STORES[digest[0] % len(STORES)]


# -- customers ----------------------------------------------------------------------------


def pulled_members(lake: Lake) -> list[dict]:
    """The hub members of the latest export pulled into the lake, or none."""
    files = [path for path in lake.files(MEMBERS) if file_stem(path) == HUB_CONNECTION]
    return lake.read_table(files[-1]).to_pylist() if files else []


def new_customer_id(number: int) -> str:
    # Hub members' ids are C + 8 digits; the shop's own customers stand out with W.
    return f"W{number:07d}"


def _customers(
    members: list[dict], count: int, seed: int, rng: np.random.Generator, fake: Faker
) -> list[dict]:
    # Customers the hub got from an earlier demo's import are the shop's own new ones, not
    # candidates: otherwise every import would change the tables.
    own = {new_customer_id(n) for n in range(1, count + 1)}
    candidates = [m for m in members if m["customer_id"] and m["customer_id"] not in own]
    # Chosen by a hash of the id, so members added to the hub do not reshuffle the choice.
    candidates.sort(key=lambda m: hashlib.sha256(f"{seed}:{m['customer_id']}".encode()).digest())
    new = max(1, round(count * NEW_CUSTOMER_SHARE))
    existing = candidates[: max(0, count - new)]
    customers = [_from_member(member, rng, fake) for member in existing]
    for number in range(1, count - len(existing) + 1):
        customers.append(_new_customer(new_customer_id(number), rng, fake))
    return customers


#: What the shop copies from a hub member: fields the hub does not change on its own.
COPIED = (
    "customer_id",
    "full_name",
    "display_email",
    "display_mobile",
    "gender",
    "line_uid",
    "channel_type",
    "external_member_id",
)


def _from_member(member: dict, rng: np.random.Generator, fake: Faker) -> dict:
    # City, address, region and display name change in the hub as contacts live (the
    # sandbox's live traffic); the shop keeps its own, so its tables do not follow them.
    birthday = member["birthday"]
    return {
        **{name: member[name] for name in COPIED},
        "display_name": (member["full_name"] or "").partition(" ")[0] or None,
        "birthday": date.fromisoformat(birthday) if birthday else None,
        "region": "tw",
        "city": _pick(rng, CITIES),
        "address": fake.street_address(),
        "external_channel_id": HUB_CHANNELS.get(member["channel_type"]),
        "signed_up_at": _at(rng, HISTORY_START, LAST_SIGN_UP),
    }


def _new_customer(customer_id: str, rng: np.random.Generator, fake: Faker) -> dict:
    first, last = fake.first_name(), fake.last_name()
    # Not in the hub: no channel the shop knows of.
    return dict.fromkeys(CUSTOMERS.schema.names) | {
        "customer_id": customer_id,
        "full_name": f"{first} {last}",
        "display_name": first,
        "display_email": f"{first}.{last}.{customer_id}@example.com".lower(),
        "display_mobile": f"+8869{int(rng.integers(10**8)):08d}",
        "gender": _pick(rng, ("female", "male", "other", "unknown")),
        "birthday": date(1965, 1, 1) + timedelta(days=int(rng.integers(40 * 365))),
        "region": "tw",
        "city": _pick(rng, CITIES),
        "address": fake.street_address(),
        "signed_up_at": _at(rng, HISTORY_START, LAST_SIGN_UP),
    }


# -- coupons ------------------------------------------------------------------------------

# (name, discount_type, source_discount_type, discount_value, applicable categories)
COUPON_KINDS = (
    ("Welcome 10% off", "percentage", "percent", 10.0, None),
    ("NT$200 off skincare", "fixed_amount", "amount", 200.0, ["skincare"]),
    ("Free shipping", "free_shipping", "shipping", 0.0, None),
)
COUPON_PATHS = (
    (("active", "redeemed"), 0.4),
    (("active", "expired"), 0.3),
    (("scheduled", "active"), 0.2),
    (("active",), 0.1),
)
COUPON_SOURCE_STATUS = {
    "scheduled": "PENDING",
    "active": "ACTIVE",
    "redeemed": "USED",
    "expired": "EXPIRED",
    "revoked": "REVOKED",
}


def _coupons(customers: list[dict], rng: np.random.Generator) -> list[dict]:
    rows: list[dict] = []
    for customer in customers:
        for _ in range(int(rng.poisson(0.7))):
            rows.extend(_coupon(customer, f"CP{len(rows) + 1:06d}", rng))
    return rows


def _coupon(customer: dict, coupon_id: str, rng: np.random.Generator) -> list[dict]:
    name, kind, source_kind, value, categories = _pick(rng, COUPON_KINDS)
    code = "".join(_pick(rng, "ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(8))
    issued = _begin(rng, customer, timedelta(days=60))
    valid_from = issued + timedelta(days=1)
    fields = {
        "id": coupon_id,
        "name": name,
        "url": f"https://shop.example.com/coupons/{code}",
        "code": code,
        "description": f"{name}, one use per customer",
        "valid_from": valid_from,
        "valid_to": valid_from + timedelta(days=30),
        "applicable_store_ids": [WEB.id],
        "applicable_item_category_ids": categories,
        "discount_type": kind,
        "source_discount_type": source_kind,
        "discount_value": value,
    }
    versions, at = [], issued
    for status in _path(rng, COUPON_PATHS):
        versions.append(
            _common(WEB, customer["customer_id"], at)
            | fields
            | {
                "status": status,
                "source_status": COUPON_SOURCE_STATUS[status],
                "is_redeemable": status == "active",
            }
        )
        at = _after(rng, max(at, valid_from), timedelta(hours=1), timedelta(days=29))
    return versions


def _invalid_coupon(customer: dict, rng: np.random.Generator) -> dict:
    coupon = _coupon(customer, "CP-BROKEN-URL", rng)[0]
    return coupon | {"url": f"/coupons/{coupon['code']}"}  # a uri must be absolute


# -- orders and fulfillments --------------------------------------------------------------

ORDER_PATHS = (
    (("created", "confirmed", "completed"), 0.65),
    (("created", "confirmed", "processing"), 0.1),
    (("created", "confirmed"), 0.05),
    (("created", "cancelled"), 0.12),
    (("created", "confirmed", "completed", "returned"), 0.08),
)
ORDER_SOURCE_STATUS = {
    "created": "pending_payment",
    "confirmed": "paid",
    "processing": "packing",
    "completed": "fulfilled",
    "cancelled": "voided",
    "returned": "refunded",
}
ORDER_STEP = {
    "created": (timedelta(0), timedelta(seconds=1)),
    "confirmed": (timedelta(minutes=1), timedelta(hours=2)),
    "processing": (timedelta(hours=1), timedelta(days=1)),
    "completed": (timedelta(days=1), timedelta(days=5)),
    "cancelled": (timedelta(minutes=10), timedelta(days=2)),
    "returned": (timedelta(days=3), timedelta(days=14)),
}
ORDER_STATUSES = tuple(ORDER_SOURCE_STATUS)
#: paid_amount by status where it is not the total: captured payments minus refunds.
PAID = {"created": None, "cancelled": 0.0, "returned": 0.0}
SHIPPING_STEPS = (
    ("unfulfilled", "pending"),
    ("unfulfilled", "label_created"),
    ("fulfilled", "in_transit"),
    ("fulfilled", "delivered"),
)
SHIPPING_STATUSES = ("pending", "label_created", "in_transit", "delivered", "exception")
CARRIERS = ("Black Cat", "Chunghwa Post")


@dataclass
class Order:
    """An order's versions and what its fulfillment needs."""

    versions: list[dict]
    store: Store
    confirmed_at: datetime | None


def _orders(
    customers: list[dict], coupons: dict[str, list[str]], rng: np.random.Generator
) -> list[Order]:
    orders: list[Order] = []
    for customer in customers:
        for _ in range(int(rng.poisson(2.2))):
            order_id = f"O{len(orders) + 100001}"
            orders.append(_order(customer, order_id, coupons.get(customer["customer_id"]), rng))
    return orders


def _order(
    customer: dict, order_id: str, coupons: list[str] | None, rng: np.random.Generator
) -> Order:
    store = WEB if rng.random() < 0.7 else _pick(rng, OFFLINE)
    coupon_id = _pick(rng, coupons) if coupons and rng.random() < 0.4 else None
    items = _items(rng, coupon_id)
    subtotal = sum(item["price"] * item["count"] for item in items)
    discount = sum(item["discount"] or 0.0 for item in items)
    fields = {"id": order_id, "currency": CURRENCY, "items": items, "coupon_id": coupon_id}
    if store is WEB:
        delivery = _pick(rng, ("home_delivery", "convenience_store_pickup"))
        shipping = 0.0 if subtotal >= 1500 else 80.0
        payment = _pick(rng, ("credit_card", "line_pay", "cash_on_delivery"))
        fields |= {
            "delivery_method": delivery,
            "shipping_location": customer["city"],
            "shipping_address": customer["address"] if delivery == "home_delivery" else None,
            "pickup_store_id": "cvs-7011" if delivery != "home_delivery" else None,
            "pickup_store_name": "7-ELEVEN Xinyi" if delivery != "home_delivery" else None,
            "store_description": "Online shop",
        }
        path = _path(rng, ORDER_PATHS)
    else:
        shipping, payment = 0.0, _pick(rng, ("credit_card", "cash"))
        fields |= {
            "delivery_method": "in_store",
            "shipping_location": store.city,
            "pickup_store_id": store.id,
            "pickup_store_name": store.name,
        }
        path = ("completed",)  # a till sale is complete when it is rung up
    total = subtotal - discount + shipping
    fields |= {
        "total_amount": total,
        "payment_method": payment,
        "payment_provider": {"credit_card": "stripe", "line_pay": "line_pay"}.get(payment),
        "subtotal_amount": subtotal,
        "total_discount": discount,
        "shipping_amount": shipping,
        "tax_amount": round(total * 5 / 105, 2),  # 5% VAT, included in the prices
        "promotion_name": "Autumn sale" if discount else None,
        "promotion_id": "PROMO-AUTUMN" if discount else None,
    }
    at = _begin(rng, customer, timedelta(days=25))
    versions, confirmed_at = [], None
    for status in path:
        at = _after(rng, at, *ORDER_STEP[status])
        confirmed_at = at if status == "confirmed" else confirmed_at
        captured = status in ("confirmed", "processing", "completed", "returned")
        versions.append(
            _common(store, customer["customer_id"], at)
            | fields
            | {
                "status": status,
                "source_status": ORDER_SOURCE_STATUS[status],
                "paid_amount": PAID.get(status, total),
                "payment_transaction_id": f"txn_{order_id.lower()}" if captured else None,
            }
        )
    return Order(versions, store, confirmed_at)


def _items(rng: np.random.Generator, coupon_id: str | None) -> list[dict]:
    chosen = rng.choice(len(PRODUCTS), int(rng.integers(1, 4)), replace=False)
    items = []
    for position, index in enumerate(chosen.tolist()):
        product_id, name, category, price, variants = PRODUCTS[index]
        with_coupon = coupon_id is not None and position == 0
        items.append(
            {
                "id": product_id,
                "name": name,
                "price": price,
                "count": int(rng.integers(1, 4)),
                "category": category,
                "variant": _pick(rng, variants),
                "discount": round(price * 0.1, 2) if with_coupon else None,
                "coupon_id": coupon_id if with_coupon else None,
            }
        )
    return items


def _invalid_orders(customer: dict, rng: np.random.Generator) -> list[dict]:
    """One order each with a 2-letter currency, no items, and an item of negative price."""
    currency, empty, negative = (
        _order(customer, f"O-BROKEN-{n}", None, rng).versions[-1] for n in (1, 2, 3)
    )
    item = negative["items"][0] | {"price": -120.0}  # prices are >= 0 (sandbox/README.md)
    return [
        currency | {"currency": "NT"},  # the hub wants exactly 3 chars
        empty | {"items": []},  # the hub wants 1..200 items
        negative | {"items": [item, *negative["items"][1:]]},
    ]


def _fulfillments(order: Order, rng: np.random.Generator) -> list[dict]:
    """Web orders from their confirmation on: pending, label, in transit, delivered."""
    if order.store is not WEB or order.confirmed_at is None:
        return []
    last = order.versions[-1]
    status = last["status"]
    steps = {"confirmed": 1, "processing": 2}.get(status, len(SHIPPING_STEPS))
    tracking = f"{int(rng.integers(10**11, 10**12))}"
    fields = {
        "order_id": last["id"],
        "shipping_location": last["shipping_location"],
        "delivery_method": last["delivery_method"],
        "shipping_address": last["shipping_address"],
        "shipping_carrier": _pick(rng, CARRIERS),
        "shipping_tracking_id": tracking,
        "shipping_tracking_url": f"https://track.example.com/parcels/{tracking}",
        "estimated_delivery_date": (order.confirmed_at + timedelta(days=3)).date(),
        "pickup_store_id": last["pickup_store_id"],
        "pickup_store_name": last["pickup_store_name"],
    }
    versions, at, shipped_at, delivered_at = [], order.confirmed_at, None, None
    for fulfillment_status, shipping_status in SHIPPING_STEPS[:steps]:
        shipped_at = at if shipping_status == "in_transit" else shipped_at
        delivered_at = at if shipping_status == "delivered" else delivered_at
        versions.append(
            _common(WEB, last["source_platform_customer_id"], at)
            | fields
            | {
                "fulfillment_status": fulfillment_status,
                "shipping_status": shipping_status,
                "fulfillment_source_status": fulfillment_status.upper(),
                "shipping_source_status": shipping_status.upper(),
                "shipped_at": shipped_at,
                "delivered_at": delivered_at,
            }
        )
        at = _after(rng, at, timedelta(hours=2), timedelta(days=1))
    if status == "returned":
        versions.append(
            versions[-1]
            | {
                "timestamp": _after(rng, at, timedelta(days=3), timedelta(days=10)),
                "fulfillment_status": "returned",
                "fulfillment_source_status": "RETURNED",
            }
        )
    return versions


# -- loyalty: tiers and points ------------------------------------------------------------


#: Cases about a failed order resolved (the others still open).
CASE_RESOLVED_SHARE = 0.8


def _support_cases(orders: list[Order], rng: np.random.Generator) -> list[dict]:
    """A case for each order that failed (it ended `cancelled`: its payment voided), opened
    when it failed; most are resolved hours to days later."""
    cases = []
    for order in orders:
        last = order.versions[-1]
        if last["status"] != "cancelled":
            continue
        opened = last["timestamp"]
        resolved = rng.random() < CASE_RESOLVED_SHARE
        cases.append(
            {
                "case_id": f"C{len(cases) + 10001}",
                "customer_id": last["source_platform_customer_id"],
                "order_id": last["id"],
                "reason": "order_failed",
                "status": "resolved" if resolved else "open",
                "opened_at": opened,
                "resolved_at": _after(rng, opened, timedelta(hours=2), timedelta(days=4))
                if resolved
                else None,
            }
        )
    return cases


def _tiers(customers: list[dict], rng: np.random.Generator) -> tuple[list[dict], dict[str, str]]:
    """Each customer starts in bronze; some move up, the old tier expiring as the new one
    starts. Also returns each customer's tier at the end (their `member_level`)."""
    rows: list[dict] = []
    levels: dict[str, str] = {}
    for customer in customers:
        at = since = customer["signed_up_at"]
        spend, level = 0.0, 0
        while True:
            rows.append(_tier_row(customer, TIERS[level], "active", at, since, spend))
            if level + 1 == len(TIERS) or rng.random() > 0.45:
                break
            at = _after(rng, at, timedelta(days=5), timedelta(days=20))
            spend += float(rng.integers(3, 30)) * 500
            rows.append(_tier_row(customer, TIERS[level], "expired", at, since, spend))
            level, since = level + 1, at
        if rng.random() < 0.1:
            grace = _after(rng, at, timedelta(days=10), timedelta(days=30))
            rows.append(_tier_row(customer, TIERS[level], "grace_period", grace, since, spend))
        levels[customer["customer_id"]] = TIERS[level]
    return rows, levels


def _tier_row(
    customer: dict, tier: str, status: str, at: datetime, effective: datetime, spend: float
) -> dict:
    return _common(_home_store(customer), customer["customer_id"], at, LOYALTY_PLATFORM) | {
        "tier_id": tier,
        "tier_name": f"{tier.title()} member",
        "tier_status": status,
        "tier_description": f"The {tier} tier of the Demo Beauty club",
        "tier_source_status": status.upper(),
        "tier_effective_from": effective,
        "tier_expiry_at": effective + timedelta(days=365),
        "currency": CURRENCY,
        "lifetime_spend_amount": spend,
        "lifetime_spend_updated_at": at,
        "tier_spend_amount": spend / 2,
    }


def _points(customers: list[dict], rng: np.random.Generator) -> tuple[list[dict], dict]:
    """Loyalty points (and for some, store credit) as balances that change over time; also
    each customer's latest loyalty balance."""
    rows: list[dict] = []
    balances: dict[str, int] = {}
    for customer in customers:
        kinds = [("loyalty_point", None, 5)]
        if rng.random() < 0.3:
            kinds.append(("store_credit", CURRENCY, 2))
        for kind, currency, most in kinds:
            at, balance = customer["signed_up_at"], 0.0
            for _ in range(int(rng.integers(1, most + 1))):
                at = _after(rng, at, timedelta(hours=1), timedelta(days=20))
                balance = max(balance + float(rng.integers(-5, 30)) * 10, 0.0)
                rows.append(
                    _common(_home_store(customer), customer["customer_id"], at, LOYALTY_PLATFORM)
                    | {
                        "balance": balance,
                        "type": kind,
                        "currency": currency,
                        "expiry_at": datetime(2027, 12, 31, 23, 59, 59, tzinfo=UTC),
                    }
                )
            if kind == "loyalty_point":
                balances[customer["customer_id"]] = int(balance)
    return rows, balances


# -- reservations -------------------------------------------------------------------------

# (service_id, service_name, service_type, minutes)
SERVICES = (
    ("SV-01", "Skin consultation", "consultation", 30),
    ("SV-02", "Makeup lesson", "lesson", 90),
    ("SV-03", "Facial treatment", "treatment", 60),
)
STAFF = (("ST-01", "Mei Lin"), ("ST-02", "Yu-Ting Chen"), ("ST-03", "Hao Wang"))
RESERVATION_PATHS = (
    (("scheduled", "confirmed", "checked_in", "completed"), 0.55),
    (("scheduled", "cancelled"), 0.15),
    (("scheduled", "confirmed", "no_show"), 0.1),
    (("scheduled", "rescheduled", "confirmed", "completed"), 0.2),
)
RESERVATION_STATUSES = ("scheduled", "confirmed", "checked_in", "completed", "cancelled")


def _reservations(customers: list[dict], rng: np.random.Generator) -> list[dict]:
    rows: list[dict] = []
    number = 0
    for customer in customers:
        if rng.random() >= 0.35:
            continue
        for _ in range(int(rng.integers(1, 3))):
            number += 1
            rows.extend(_reservation(customer, f"R{number:06d}", rng))
    return rows


def _reservation(customer: dict, reservation_id: str, rng: np.random.Generator) -> list[dict]:
    store = _pick(rng, OFFLINE)
    service_id, service_name, service_type, minutes = _pick(rng, SERVICES)
    staff_id, staff_name = _pick(rng, STAFF)
    booked = _begin(rng, customer, timedelta(days=25))
    start = _after(rng, booked, timedelta(days=2), timedelta(days=14))
    start = start.replace(minute=0, second=0)
    fields = {
        "id": reservation_id,
        "description": f"{service_name} at {store.name}",
        "service_type": service_type,
        "service_id": service_id,
        "service_name": service_name,
        "address": store.address,
        "staff_id": staff_id,
        "staff_name": staff_name,
    }
    versions, at = [], booked
    for status in _path(rng, RESERVATION_PATHS):
        if status == "rescheduled":
            start += timedelta(days=int(rng.integers(1, 8)))
        end = start + timedelta(minutes=minutes)
        at = {
            "checked_in": start - timedelta(minutes=5),
            "completed": end,
            "no_show": start + timedelta(minutes=30),
        }.get(status) or _after(rng, at, timedelta(minutes=5), timedelta(hours=20))
        versions.append(
            _common(store, customer["customer_id"], at, BOOKING_PLATFORM)
            | fields
            | {"status": status, "source_status": status.upper(), "start_at": start, "end_at": end}
        )
    return versions


# -- behavior events ----------------------------------------------------------------------

# (utm_source, utm_medium, utm_campaign, utm_content, utm_term); None: direct traffic.
CAMPAIGNS = (
    None,
    ("line", "message", "autumn_sale", "banner_a", "(not set)"),
    ("facebook", "cpc", "serum_launch", "video", "vitamin c serum"),
    ("google", "organic", None, None, "toner"),
)
DIRECT = (None, None, None, None, "(not set)")


def _behavior_events(customers: list[dict], rng: np.random.Generator) -> list[dict]:
    """Web sessions: a page view, a product viewed, maybe carted, checked out and bought,
    and the time spent; the seven behaviors with the sandbox's params names."""
    rows: list[dict] = []
    for customer in customers:
        for _ in range(int(rng.poisson(1.5))):
            start = _at(rng, customer["signed_up_at"], HISTORY_END - timedelta(hours=1))
            rows.extend(_session(customer, start, len(rows), rng))
    return rows


def _session(customer: dict, start: datetime, first: int, rng: np.random.Generator) -> list:
    product_id, product_name, _, price, _ = _pick(rng, PRODUCTS)
    quantity = int(rng.integers(1, 3))
    items = [
        {"item_id": product_id, "item_name": product_name, "price": price, "quantity": quantity}
    ]
    cart = {"currency": CURRENCY, "items": items}
    page_view_id = f"pv_{first + 1:07d}"
    steps: list[tuple[str, dict]] = [
        (
            "page_view",
            {
                "page_path": f"/products/{product_id.lower()}",
                "page_title": f"{product_name} | Demo Beauty",
                "page_view_id": page_view_id,
            },
        ),
        ("view_item", cart),
    ]
    if rng.random() < 0.5:
        steps.append(("add_to_cart", cart))
        if rng.random() < 0.2:
            steps.append(("remove_from_cart", cart))
        elif rng.random() < 0.6:
            steps.append(("begin_checkout", cart))
            if rng.random() < 0.7:
                revenue = price * quantity
                purchase = cart | {
                    "transaction_id": f"web_{first + 1:07d}",
                    "revenue": revenue,
                    "tax": round(revenue * 5 / 105, 2),
                    "shipping": 0.0 if revenue >= 1500 else 80.0,
                }
                steps.append(("purchase", purchase))
    engagement = {
        "engagement_time_msec": int(rng.integers(2_000, 600_000)),
        "page_view_id": page_view_id,
    }
    steps.append(("user_engagement", engagement))
    # The hub requires utm_term: "(not set)" where there is none.
    source, medium, campaign, content, term = _pick(rng, CAMPAIGNS) or DIRECT
    events, at = [], start
    for offset, (behavior, params) in enumerate(steps):
        events.append(
            {
                "event_key": f"ev_{first + offset + 1:07d}",
                "customer_id": customer["customer_id"],
                "occurred_at": at,
                "behavior": behavior,
                "utm_campaign": campaign,
                "utm_source": source,
                "utm_medium": medium,
                "utm_content": content,
                "utm_term": term,
                "language": "zh-TW",
                "geography": customer["region"].upper(),
                "params": json.dumps(params, sort_keys=True),
            }
        )
        at = _after(rng, at, timedelta(seconds=5), timedelta(minutes=3))
    return events


def _invalid_behavior_event(customer: dict, number: int, rng: np.random.Generator) -> dict:
    page_view = _session(customer, LAST_SIGN_UP, number, rng)[0]
    params = json.loads(page_view["params"])
    del params["page_title"]  # page_view needs page_path, page_title, page_view_id
    return page_view | {"params": json.dumps(params, sort_keys=True)}


# -- profile changes ----------------------------------------------------------------------


def _contact_changes(
    customers: list[dict],
    levels: dict[str, str],
    balances: dict[str, int],
    rng: np.random.Generator,
) -> list[dict]:
    """What the brand knows of some hub contacts (their tier, city, the custom fields), one
    row per change. Only contacts the shop can address: a hub member with a channel id."""
    rows: list[dict] = []
    for customer in customers:
        if customer["external_channel_id"] is None or rng.random() >= 0.7:
            continue
        customer_id = customer["customer_id"]
        row = {
            "customer_id": customer_id,
            "changed_at": _begin(rng, customer, timedelta(days=31)),
            "member_level": levels[customer_id],
            "city": customer["city"],
            "birthday": customer["birthday"],
            "gender": customer["gender"],
            "display_mobile": customer["display_mobile"],
            "nickname": customer["display_name"],
            "loyalty_points": balances[customer_id],
            "anniversary": customer["signed_up_at"].date(),
            "last_store_visit": None,
            "preferred_store": _pick(rng, PREFERRED_STORES),
            "skin_type": _pick(rng, (*SKIN_TYPES, None)),
        }
        rows.append(row)
        if rng.random() < 0.4:  # moved, and shops elsewhere now
            visit = _after(rng, row["changed_at"], timedelta(days=1), timedelta(days=30))
            store = _pick(rng, PREFERRED_STORES)
            rows.append(
                row
                | {
                    "changed_at": visit,
                    "city": _pick(rng, CITIES),
                    "preferred_store": store,
                    "last_store_visit": visit,
                }
            )
    if rows:
        # The hub takes display_mobile as E.164, which wants "+" and the country code.
        rows[-1] = rows[-1] | {"display_mobile": "0912-345-678"}
    return rows


# -- how a source delivers its rows -------------------------------------------------------


def _as_delivered(
    rows: list[dict],
    key: tuple[str, ...],
    conflicting: Callable[[dict], dict],
    rng: np.random.Generator,
) -> list[dict]:
    """A change log as sources deliver it: in time order, except a few records whose versions
    came newest first; one record with two different versions at the same time; a few rows
    delivered twice."""
    rows = sorted(rows, key=lambda row: row["timestamp"])
    positions: dict[tuple, list[int]] = {}
    for position, row in enumerate(rows):
        positions.setdefault(tuple(row[name] for name in key), []).append(position)
    versioned = [found for found in positions.values() if len(found) > 1]
    # The first picked record gets the conflict, the others arrive newest first.
    picked_count = min(len(versioned), 2 + len(versioned) // 30)
    chosen = rng.choice(len(versioned), picked_count, replace=False)
    picked = [versioned[i] for i in chosen.tolist()]
    for found in picked[1:]:
        for position, row in zip(found, [rows[p] for p in reversed(found)], strict=True):
            rows[position] = row
    if picked:
        newest = picked[0][-1]
        rows.insert(newest + 1, conflicting(rows[newest]))
    for position in sorted(rng.choice(len(rows), max(1, len(rows) // 100), replace=False)):
        rows.insert(int(rng.integers(position, len(rows) + 1)), dict(rows[position]))
    return rows


#: What the second version in a conflict differs in: a status, or the balance.
CONFLICTS: dict[str, Callable[[dict], dict]] = {
    "coupons": lambda row: row | {"status": _other(row["status"], ("revoked", "expired"))},
    "orders": lambda row: row | {"status": _other(row["status"], ORDER_STATUSES)},
    "order_fulfillments": lambda row: (
        row | {"shipping_status": _other(row["shipping_status"], SHIPPING_STATUSES)}
    ),
    "membership_tiers": lambda row: (
        row | {"tier_status": _other(row["tier_status"], ("suspended", "cancelled"))}
    ),
    "points": lambda row: row | {"balance": row["balance"] + 50.0},
    "reservations": lambda row: row | {"status": _other(row["status"], RESERVATION_STATUSES)},
}


# -- the dataset --------------------------------------------------------------------------


def declare_shop(lake: Lake) -> None:
    """Write each shop table the lake lacks, empty: the warehouse can then build the demo's
    views (`WAREHOUSE_SQL=demo/sql`) before `generate_shop` has run. A table already there
    is left as it is."""
    for stream in SHOP_STREAMS:
        if not lake.files(stream):
            lake.write(stream, FILE, [])


def generate_shop(lake: Lake, seed: int = 7, customers: int = 300) -> dict[str, int]:
    """Write every shop table to the lake; the same seed and pulled members give the same
    tables. Returns the rows written per table."""
    # One generator per table, so a change in one table's draws leaves the others alone.
    rngs = {stream.name: np.random.default_rng([seed, i]) for i, stream in enumerate(SHOP_STREAMS)}
    # Imported here: Faker alone is 60 MB of resident memory that only the generator needs,
    # not the processes that only declare the shop's tables.
    from faker import Faker

    fake = Faker("en_US")
    fake.seed_instance(seed)
    people = _customers(pulled_members(lake), customers, seed, rngs["customers"], fake)
    sample = people[0]

    rng = rngs["coupons"]
    coupons = _coupons(people, rng)
    coupons.append(_invalid_coupon(sample, rng))
    issued: dict[str, list[str]] = {}
    for coupon in coupons:
        issued.setdefault(coupon["source_platform_customer_id"], []).append(coupon["id"])

    rng = rngs["orders"]
    orders = _orders(people, issued, rng)
    order_rows = [row for order in orders for row in order.versions]
    order_rows += _invalid_orders(sample, rng)
    fulfillments = [row for order in orders for row in _fulfillments(order, rng)]

    tiers, levels = _tiers(people, rngs["membership_tiers"])
    points, balances = _points(people, rngs["points"])

    rng = rngs["reservations"]
    reservations = _reservations(people, rng)
    broken = _reservation(sample, "R-BROKEN", rng)[0]
    reservations.append(broken | {"end_at": None})  # start_at and end_at are required

    rng = rngs["behavior_events"]
    events = _behavior_events(people, rng)
    events.append(_invalid_behavior_event(sample, len(events), rng))
    for position in rng.choice(len(events), max(1, len(events) // 100), replace=False).tolist():
        events.append(dict(events[position]))  # the tracker sent it twice

    tables = {
        CUSTOMERS: people,
        COUPONS: coupons,
        ORDERS: order_rows,
        ORDER_FULFILLMENTS: fulfillments,
        MEMBERSHIP_TIERS: tiers,
        POINTS: points,
        RESERVATIONS: reservations,
        BEHAVIOR_EVENTS: events,
        CONTACT_CHANGES: _contact_changes(people, levels, balances, rngs["contact_changes"]),
        SUPPORT_CASES: _support_cases(orders, rngs["support_cases"]),
    }
    counts = {}
    for stream, rows in tables.items():
        if stream.name in CONFLICTS:
            rows = _as_delivered(rows, stream.key[:-1], CONFLICTS[stream.name], rngs[stream.name])
        counts[stream.name] = lake.write(stream, FILE, rows)
    return counts
