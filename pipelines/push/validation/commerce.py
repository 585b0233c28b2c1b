"""The commerce records the push submits one by one (coupons, orders, order fulfillments,
membership tiers, points, reservations) and `RECORD_MODELS`, each record type's model. Their
field types are those of pipelines/push/validation/fields.py; pipelines/push/validation/dispatch.py
validates a row with them.
"""

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StrictBool

from pipelines.push.validation.fields import (
    ROW,
    ChannelType,
    Count,
    Currency,
    Date,
    DateTime,
    NonNegative,
    Number,
    Uri,
    ids,
    max_text,
    text,
)

# -- commerce records: fields and bounds as the hub documents them ----------------------------


class CommonFields(BaseModel):
    model_config = ROW

    timestamp: DateTime
    source_platform_name: text(1, 64)
    source_store_type: Literal["online_store", "offline_store"]
    source_store_id: text(1, 64)
    source_platform_customer_id: text(1, 128)
    source_store_name: max_text(255) = None
    channel_type: ChannelType | None = None
    external_channel_id: max_text(128) = None
    external_member_id: max_text(128) = None


class CouponRecord(CommonFields):
    id: text(1, 64)
    name: text(1, 255)
    url: Uri
    code: text(1, 64)
    is_redeemable: StrictBool
    status: Literal["active", "scheduled", "redeemed", "expired", "inactive", "revoked", "unknown"]
    description: max_text(2000) = None
    source_status: max_text(255) = None
    valid_from: DateTime | None = None
    valid_to: DateTime | None = None
    applicable_store_ids: ids(100) = None
    applicable_item_ids: ids(500) = None
    applicable_item_category_ids: ids(200) = None
    discount_type: Literal["percentage", "fixed_amount", "free_shipping"]
    source_discount_type: max_text(255) = None
    discount_value: Number


class OrderItem(BaseModel):
    """Required fields and bounds: not documented by the hub; the sandbox's choice."""

    model_config = ROW

    id: text(1, 64)
    name: text(1, 255)
    price: NonNegative
    count: Count
    category: max_text(255) = None
    variant: max_text(255) = None
    discount: NonNegative | None = None
    coupon_id: max_text(64) = None


class OrderRecord(CommonFields):
    id: text(1, 64)
    status: Literal[
        "created", "confirmed", "processing", "completed", "cancelled", "returned", "unknown"
    ]
    total_amount: Number
    currency: Currency
    items: Annotated[list[OrderItem], Field(min_length=1, max_length=200)]
    payment_method: text(1, 255)
    delivery_method: text(1, 255)
    shipping_location: text(1, 255)
    source_status: max_text(255) = None
    description: max_text(2000) = None
    store_description: max_text(1000) = None
    shipping_address: max_text(500) = None
    subtotal_amount: Number | None = None
    total_discount: Number | None = None
    shipping_amount: Number | None = None
    tax_amount: Number | None = None
    paid_amount: Number | None = None
    coupon_id: max_text(64) = None
    promotion_name: max_text(255) = None
    promotion_id: max_text(64) = None
    payment_transaction_id: max_text(128) = None
    payment_provider: max_text(64) = None
    pickup_store_id: max_text(64) = None
    pickup_store_name: max_text(255) = None


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
    fulfillment_source_status: max_text(255) = None
    shipping_source_status: max_text(255) = None
    delivery_method: max_text(255) = None
    shipping_address: max_text(500) = None
    shipping_carrier: max_text(128) = None
    shipping_tracking_id: max_text(128) = None
    shipping_tracking_url: Uri | None = None
    estimated_delivery_date: Date | None = None
    pickup_store_id: max_text(64) = None
    pickup_store_name: max_text(255) = None
    shipped_at: DateTime | None = None
    delivered_at: DateTime | None = None


class MembershipTierRecord(CommonFields):
    tier_id: text(1, 64)
    tier_name: text(1, 255)
    tier_status: Literal[
        "active", "grace_period", "expired", "suspended", "cancelled", "pending", "unknown"
    ]
    tier_description: max_text(2000) = None
    tier_source_status: max_text(255) = None
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
    source_status: max_text(255) = None
    address: max_text(500) = None
    staff_id: max_text(64) = None
    staff_name: max_text(255) = None


RECORD_MODELS: dict[str, type[BaseModel]] = {
    "coupon": CouponRecord,
    "order": OrderRecord,
    "order_fulfillment": OrderFulfillmentRecord,
    "membership_tier": MembershipTierRecord,
    "point": PointRecord,
    "reservation": ReservationRecord,
}
