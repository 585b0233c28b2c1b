"""What the Dagster UI's catalog shows of a table: its columns, their types and what they hold
(docs/dagster.md). A stream's columns are its Arrow schema (and a daily stream's `date`,
`Stream.day`); a column's description is the one its declaration carries (`DESCRIPTION`,
`pipelines/stream.py`), which for a column copied from a response model is the model field's
docstring (`pipelines/lake/schemas.py`)."""

from collections.abc import Iterable

import dagster as dg
import pyarrow as pa

from pipelines.stream import DESCRIPTION, Stream, described


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    """The columns of `schema`, typed as Arrow writes them (`list<item: string>`)."""
    return column_schema_of(
        (field.name, str(field.type), (field.metadata or {}).get(DESCRIPTION, b"").decode() or None)
        for field in schema
    )


def column_schema_of(columns: Iterable[tuple[str, str, str | None]]) -> dg.TableSchema:
    """Columns given as name, type and description (`None`: none)."""
    return dg.TableSchema(
        columns=[dg.TableColumn(name, kind, description=note) for name, kind, note in columns]
    )


def table_metadata(schema: pa.Schema, relation: str) -> dict[str, object]:
    """An asset's definition metadata, under the keys the UI reads: its columns, and the
    warehouse relation that shows it."""
    return {"dagster/column_schema": column_schema(schema), "dagster/table_name": relation}


def catalog_schema(stream: Stream) -> pa.Schema:
    """The columns the catalog shows of `stream`: its schema, and a daily stream's `date`
    where its views have it, first (after `connection` where that comes first)."""
    schema = stream.schema
    if not stream.daily or "date" in schema.names:
        return schema
    day = described("date", pa.date32(), stream.day)
    return schema.insert(1 if schema.names[:1] == ["connection"] else 0, day)


def stream_metadata(stream: Stream) -> dict[str, object]:
    return table_metadata(catalog_schema(stream), stream.relation)


def row_count(rows: int, *, partition: bool) -> dict[str, int]:
    """The rows a materialization leaves in the table, or in its partition (the keys the UI
    reads)."""
    return {"dagster/partition_row_count" if partition else "dagster/row_count": rows}


# -- the push's columns --------------------------------------------------------------------------

#: What each column of an outbound view holds: the data hub field it is sent as, in the words
#: of the hub's API; the validation models (pipelines/push/validation/) check its rules and
#: say its values. `{record}` is the record type's name for one (`RECORD_NAMES`).
OUTBOUND_NOTES = {
    # Every submitted commerce record.
    "timestamp": (
        "When this state of the {record} took effect on the source platform, with its time "
        "zone: the hub keeps the submission with the latest one as the current state, so "
        "send the time of the change, not of the creation."
    ),
    "source_platform_name": "The platform the {record} comes from (1 to 64 characters).",
    "source_store_type": "Whether the source store is online or offline.",
    "source_store_id": "The source store's id on its platform (1 to 64 characters).",
    "source_platform_customer_id": (
        "The customer's id on the source platform (1 to 128 characters): whose {record} it is."
    ),
    "source_store_name": "The source store's name (at most 255 characters).",
    "channel_type": "The channel of the contact the {record} belongs to.",
    "external_channel_id": "The channel's own id (at most 128 characters).",
    "external_member_id": "The contact's member id on its channel (at most 128 characters).",
    "id": "The {record}'s id on the source platform (1 to 64 characters).",
    "status": "The {record}'s status in the hub's terms.",
    "source_status": "The {record}'s status as the source platform names it (at most 255).",
    "description": "A free note on the {record}, not interpreted (at most 2,000 characters).",
    "currency": "The currency, as its 3-letter ISO 4217 code.",
    "address": "The {record}'s address (at most 500 characters).",
    "delivery_method": "How the order is delivered (at most 255 characters).",
    "shipping_location": (
        "Where the order ships, at city level, the same granularity across a brand's orders."
    ),
    "shipping_address": "The full shipping address (at most 500 characters).",
    "pickup_store_id": "The store the order is picked up at, by its id (at most 64).",
    "pickup_store_name": "The store the order is picked up at, by its name (at most 255).",
    # Coupon.
    "name": "The coupon's name (1 to 255 characters).",
    "url": "The coupon's address (a URI, 1 to 2,083 characters).",
    "code": "The code a customer redeems the coupon with (1 to 64 characters).",
    "is_redeemable": "Whether the coupon can be redeemed now.",
    "valid_from": "When the coupon becomes valid, with its time zone (null: from now).",
    "valid_to": "When the coupon stops being valid, with its time zone (null: no end).",
    "applicable_store_ids": "The stores the coupon applies in (at most 100; null: all).",
    "applicable_item_ids": "The items the coupon applies to (at most 500; null: all).",
    "applicable_item_category_ids": (
        "The item categories the coupon applies to (at most 200; null: all)."
    ),
    "discount_type": "How the coupon discounts.",
    "source_discount_type": "The discount type as the source platform names it (at most 255).",
    "discount_value": "The discount: a percentage or an amount, by `discount_type`.",
    # Order.
    "total_amount": "The total payable after every discount, shipping and tax.",
    "items": (
        "The order's items (1 to 200), each with `id`, `name`, `price`, `count`, `category`, "
        "`variant`, `discount` and `coupon_id`."
    ),
    "payment_method": "How the order is paid (1 to 255 characters).",
    "store_description": "A note on the store (at most 1,000 characters).",
    "subtotal_amount": "The sum of item price times quantity: no discount, shipping or tax.",
    "total_discount": "Every discount of the order, shipping and tax aside.",
    "shipping_amount": "What shipping costs.",
    "tax_amount": "The order's tax.",
    "paid_amount": "What was paid: captured payments less refunds.",
    "coupon_id": "The applied coupon's system id, not its code (at most 64 characters).",
    "promotion_name": "The order's main promotion, by name (at most 255 characters).",
    "promotion_id": "The order's main promotion, by id (at most 64 characters).",
    "payment_transaction_id": "The successful capture's transaction id (at most 128).",
    "payment_provider": "Who processed the payment (at most 64 characters).",
    # Order fulfillment.
    "order_id": "The order this fulfillment is of (1 to 64 characters): one record per order.",
    "fulfillment_status": "How far the order is fulfilled.",
    "shipping_status": "Where the shipment is.",
    "fulfillment_source_status": "The fulfillment status as the source names it (at most 255).",
    "shipping_source_status": "The shipping status as the source names it (at most 255).",
    "shipping_carrier": "Who carries the shipment (at most 128 characters).",
    "shipping_tracking_id": "The carrier's tracking id (at most 128 characters).",
    "shipping_tracking_url": "Where the shipment can be tracked (a URI).",
    "estimated_delivery_date": "When the shipment is expected, as YYYY-MM-DD.",
    "shipped_at": "When the order shipped, with its time zone.",
    "delivered_at": "When the order was delivered, with its time zone.",
    # Membership tier.
    "tier_id": "The tier's id (1 to 64 characters); one record per customer and tier.",
    "tier_name": "The tier's name (1 to 255 characters).",
    "tier_status": "The customer's standing in the tier.",
    "tier_description": "A note on the tier (at most 2,000 characters).",
    "tier_source_status": "The tier status as the source platform names it (at most 255).",
    "tier_effective_from": "When the customer entered the tier, with its time zone.",
    "tier_expiry_at": "When the customer's tier ends, with its time zone.",
    "lifetime_spend_amount": "What the customer has spent in all, in `currency`.",
    "lifetime_spend_updated_at": "When `lifetime_spend_amount` was last updated.",
    "tier_spend_amount": "What the customer has spent towards the tier, in `currency`.",
    # Point.
    "balance": "The customer's balance of this `type`.",
    "type": "What the balance counts; one record per customer and type.",
    "expiry_at": "When the balance expires, with its time zone (null: never).",
    # Reservation.
    "start_at": "When the reservation starts, with its time zone.",
    "end_at": "When the reservation ends, with its time zone.",
    "service_type": "The kind of service reserved (1 to 128 characters).",
    "service_id": "The reserved service's id (1 to 64 characters).",
    "service_name": "The reserved service's name (1 to 255 characters).",
    "staff_id": "Who serves the reservation, by id (at most 64 characters).",
    "staff_name": "Who serves the reservation, by name (at most 255 characters).",
    # Behavior event.
    "behavior": "What the visitor did.",
    "utm_campaign": "The visit's `utm_campaign` (1 to 256 characters).",
    "utm_source": "The visit's `utm_source` (1 to 256 characters).",
    "utm_medium": "The visit's `utm_medium` (1 to 256 characters).",
    "utm_content": "The visit's `utm_content` (1 to 256 characters).",
    "utm_term": "The visit's `utm_term` (required; may be empty).",
    "language": "The visitor's language.",
    "geography": "Where the visitor is.",
    "params": (
        "The behavior's parameters, a JSON object: `page_view` needs `page_path`, "
        "`page_title` and `page_view_id`; the others carry the products, the currency or the "
        "engagement's duration (more fields are kept)."
    ),
}
#: The name of one record of each record type, for `OUTBOUND_NOTES`.
RECORD_NAMES = {
    "coupon": "coupon",
    "order": "order",
    "order_fulfillment": "fulfillment",
    "membership_tier": "membership tier",
    "point": "point balance",
    "reservation": "reservation",
    "contact_profile": "profile update",
    "member_import": "import row",
    "behavior_event": "event",
    "conversation_assignment": "assignment",
    "conversation_close": "close",
}
#: Where a column of a profile update or an import means what it does for a contact, as the
#: hub exports it (`datahub.members`); a profile update names its contact by these three.
PROFILE_TARGET = {
    "channel_type": "The channel of the contact to update (the hub supports `line`, `fb`, "
    "`ig`, `whatsapp` and `wccs` here).",
    "external_channel_id": "The channel's own id: with `channel_type` and "
    "`external_member_id`, the contact to update.",
    "external_member_id": "The contact's member id on its channel: with `channel_type` and "
    "`external_channel_id`, the contact to update.",
}


def outbound_columns(record_type: str) -> list[tuple[str, str, str | None]]:
    """The columns of a record type's outbound view (`view_columns`), each described: a
    profile field as the hub's member export says it, a record's field by `OUTBOUND_NOTES`,
    with the values validation accepts where they are a fixed set."""
    from pipelines.push.validation import view_columns
    from pipelines.streams.datahub import STREAMS

    (members,) = [stream for stream in STREAMS if stream.name == "members"]
    profile = {
        field.name: (field.metadata or {}).get(DESCRIPTION, b"").decode()
        for field in members.schema
    }
    profiled = record_type in ("contact_profile", "member_import")
    record = RECORD_NAMES[record_type]
    columns = []
    for name, kind, given in view_columns(record_type):
        values = given if given and given.startswith("One of ") else None
        if given and not values:  # the view's own columns, described where declared
            note = given
        elif profiled:
            note = PROFILE_TARGET.get(name) or profile.get(name) or None
        else:
            note = OUTBOUND_NOTES[name].format(record=record) if name in OUTBOUND_NOTES else None
        if note and values and "`" not in note:
            note = f"{note} {values}"
        columns.append((name, kind, note or values))
    return columns
