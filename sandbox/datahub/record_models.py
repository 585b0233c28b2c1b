"""Bodies of the data hub's record and behavior-event submissions (spec sections 2 and 4).

Every rule of section 2 is a constraint here, so a breach is a 400 naming the field. Choices
where the spec is silent (reported in sandbox/README.md): unknown fields are refused; numbers
and booleans must be JSON numbers and booleans (no strings); date-times and dates must be
ISO 8601 strings; a uri is an absolute http(s) URL; a currency is three letters A-Z
(ISO 4217); "max N" fields (no lower bound shown) may be empty strings.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from uuid import UUID

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictBool,
)

from sandbox.clock import iso
from sandbox.encoding import bounded_text

CLOSED = ConfigDict(extra="forbid")
OPEN = ConfigDict(extra="allow")  # behavior params: "extra fields allowed" (section 4)

_DATE_TIME_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}")
_DATE_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")


def _date_time_text(value: object) -> object:
    # pydantic alone would also take unix seconds ("1700000000" or 1700000000).
    if not isinstance(value, str) or not _DATE_TIME_TEXT.match(value):
        raise ValueError("must be an ISO 8601 date-time string with timezone")
    return value


def _date_text(value: object) -> object:
    if not isinstance(value, str) or not _DATE_TEXT.fullmatch(value):
        raise ValueError("must be a date string YYYY-MM-DD")
    return value


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or re.search(r"\s", value):
        raise ValueError("must be an absolute http(s) URL")
    return value


def text(low: int, high: int) -> Any:
    """A string of `low`..`high` characters."""
    return bounded_text(min_length=low, max_length=high)


def ids(most: int) -> Any:
    """`array of string or null`: at most `most` items, each max 64 (section 2)."""
    return Annotated[list[bounded_text(max_length=64)] | None, Field(max_length=most)]


# "date-time with timezone"; output in the sandbox's one timestamp form (UTC, +00:00).
DateTime = Annotated[
    AwareDatetime, BeforeValidator(_date_time_text), PlainSerializer(iso, when_used="json")
]
Date = Annotated[date, BeforeValidator(_date_text)]
Uri = Annotated[
    str,
    Field(min_length=1, max_length=2083, json_schema_extra={"format": "uri"}),
    AfterValidator(_http_url),
]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="ISO 4217, e.g. USD")]
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)]
Count = Annotated[int, Field(strict=True, ge=1)]

MaxText = {n: bounded_text(max_length=n) | None for n in (64, 128, 255, 500, 1000, 2000)}


class CommonFields(BaseModel):
    """Fields of every submitted commerce record."""

    model_config = CLOSED

    timestamp: DateTime = Field(
        description="when this state took effect; the latest timestamp is the current state"
    )
    source_platform_name: text(1, 64)
    source_store_type: Literal["online_store", "offline_store"]
    source_store_id: text(1, 64)
    source_platform_customer_id: text(1, 128)
    source_store_name: MaxText[255] = None
    channel_type: Literal["line", "fb", "ig", "whatsapp", "email", "wccs", "others"] | None = None
    external_channel_id: MaxText[128] = None
    external_member_id: MaxText[128] = None


class CouponRecord(CommonFields):
    id: text(1, 64)
    name: text(1, 255)
    url: Uri
    code: text(1, 64)
    is_redeemable: StrictBool
    status: Literal["active", "scheduled", "redeemed", "expired", "inactive", "revoked", "unknown"]
    description: MaxText[2000] = None
    source_status: MaxText[255] = None
    valid_from: DateTime | None = None
    valid_to: DateTime | None = None
    applicable_store_ids: ids(100) = None
    applicable_item_ids: ids(500) = None
    applicable_item_category_ids: ids(200) = None
    discount_type: Literal["percentage", "fixed_amount", "free_shipping"]
    source_discount_type: MaxText[255] = None
    discount_value: Number


class OrderItem(BaseModel):
    """One line of an order; which fields are required and their bounds: not shown (chosen)."""

    model_config = CLOSED

    id: text(1, 64)
    name: text(1, 255)
    price: NonNegative
    count: Count
    category: MaxText[255] = None
    variant: MaxText[255] = None
    discount: NonNegative | None = None
    coupon_id: MaxText[64] = None


class OrderRecord(CommonFields):
    id: text(1, 64)
    status: Literal[
        "created", "confirmed", "processing", "completed", "cancelled", "returned", "unknown"
    ]
    total_amount: Number
    currency: Currency
    items: list[OrderItem] = Field(min_length=1, max_length=200)
    payment_method: text(1, 255)
    delivery_method: text(1, 255)
    shipping_location: text(1, 255)
    source_status: MaxText[255] = None
    description: MaxText[2000] = None
    store_description: MaxText[1000] = None
    shipping_address: MaxText[500] = None
    subtotal_amount: Number | None = None
    total_discount: Number | None = None
    shipping_amount: Number | None = None
    tax_amount: Number | None = None
    paid_amount: Number | None = None
    coupon_id: MaxText[64] = None
    promotion_name: MaxText[255] = None
    promotion_id: MaxText[64] = None
    payment_transaction_id: MaxText[128] = None
    payment_provider: MaxText[64] = None
    pickup_store_id: MaxText[64] = None
    pickup_store_name: MaxText[255] = None


class OrderFulfillmentRecord(CommonFields):
    order_id: text(1, 64)
    fulfillment_status: Literal[
        "unfulfilled", "partially_fulfilled", "fulfilled", "cancelled", "returned", "unknown"
    ]
    shipping_location: text(1, 255)
    shipping_status: Literal[
        "pending",
        "label_created",
        "in_transit",
        "out_for_delivery",
        "delivered",
        "delivery_failed",
        "exception",
        "returned_to_sender",
        "unknown",
    ]
    fulfillment_source_status: MaxText[255] = None
    shipping_source_status: MaxText[255] = None
    delivery_method: MaxText[255] = None
    shipping_address: MaxText[500] = None
    shipping_carrier: MaxText[128] = None
    shipping_tracking_id: MaxText[128] = None
    shipping_tracking_url: Uri | None = None
    estimated_delivery_date: Date | None = None
    pickup_store_id: MaxText[64] = None
    pickup_store_name: MaxText[255] = None
    shipped_at: DateTime | None = None
    delivered_at: DateTime | None = None


class MembershipTierRecord(CommonFields):
    tier_id: text(1, 64)
    tier_name: text(1, 255)
    tier_status: Literal[
        "active", "grace_period", "expired", "suspended", "cancelled", "pending", "unknown"
    ]
    tier_description: MaxText[2000] = None
    tier_source_status: MaxText[255] = None
    tier_effective_from: DateTime | None = None
    tier_expiry_at: DateTime | None = None
    currency: Currency | None = None
    lifetime_spend_amount: Number | None = None
    lifetime_spend_updated_at: DateTime | None = None
    tier_spend_amount: Number | None = None


class PointRecord(CommonFields):
    balance: Number
    type: Literal["loyalty_point", "store_credit"]
    currency: Currency | None = None
    expiry_at: DateTime | None = None


class ReservationRecord(CommonFields):
    id: text(1, 64)
    status: Literal[
        "scheduled",
        "confirmed",
        "checked_in",
        "completed",
        "cancelled",
        "no_show",
        "rescheduled",
        "unknown",
    ]
    start_at: DateTime
    end_at: DateTime
    description: text(1, 2000)
    service_type: text(1, 128)
    service_id: text(1, 64)
    service_name: text(1, 255)
    source_status: MaxText[255] = None
    address: MaxText[500] = None
    staff_id: MaxText[64] = None
    staff_name: MaxText[255] = None


# Behavior events (section 4). Parameter names other than page_view's: not shown (chosen,
# after the common web-analytics vocabulary).

Behavior = Literal[
    "page_view",
    "view_item",
    "add_to_cart",
    "remove_from_cart",
    "begin_checkout",
    "purchase",
    "user_engagement",
]


class BehaviorItem(BaseModel):
    model_config = OPEN

    item_id: text(1, 64)
    item_name: text(1, 255)
    price: NonNegative
    quantity: Count


class PageViewParams(BaseModel):
    model_config = OPEN

    page_path: text(1, 2083)
    page_title: bounded_text(max_length=1024)
    page_view_id: text(1, 128)


class ItemParams(BaseModel):
    """view_item, add_to_cart, remove_from_cart, begin_checkout: products and currency."""

    model_config = OPEN

    currency: Currency
    items: list[BehaviorItem] = Field(min_length=1, max_length=200)


class PurchaseParams(ItemParams):
    transaction_id: text(1, 128)
    revenue: NonNegative
    tax: NonNegative
    shipping: NonNegative


class UserEngagementParams(BaseModel):
    model_config = OPEN

    engagement_time_msec: Annotated[int, Field(strict=True, ge=0)]
    page_view_id: bounded_text(min_length=1, max_length=128) | None = None


PARAMS_BY_BEHAVIOR: dict[str, type[BaseModel]] = {
    "page_view": PageViewParams,
    "view_item": ItemParams,
    "add_to_cart": ItemParams,
    "remove_from_cart": ItemParams,
    "begin_checkout": ItemParams,
    "purchase": PurchaseParams,
    "user_engagement": UserEngagementParams,
}

Utm = bounded_text(min_length=1, max_length=256) | None
FreeText = bounded_text(max_length=256) | None


class BehaviorEvent(BaseModel):
    model_config = CLOSED

    behavior: Behavior
    utm_campaign: Utm = None
    utm_source: Utm = None
    utm_medium: Utm = None
    utm_content: Utm = None
    utm_term: bounded_text(max_length=256)
    language: FreeText = None
    geography: FreeText = None
    params: dict[str, Any] = Field(
        description=(
            "Required fields by behavior: page_view: page_path, page_title, page_view_id; "
            "view_item, add_to_cart, remove_from_cart, begin_checkout: currency, "
            "items [{item_id, item_name, price, quantity}]; purchase: transaction_id, revenue, "
            "tax, shipping, currency, items; user_engagement: engagement_time_msec "
            "(page_view_id optional). Extra fields allowed."
        )
    )


class EventAccepted(BaseModel):
    event_id: UUID
