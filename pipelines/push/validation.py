"""Client-side validation of what the push pipeline sends to the data hub (the fields, bounds
and limits the hub documents), so a bad row is rejected with its field named before any request.

Rows come from the `outbound` views as DuckDB returns them. Each validator answers the JSON
body to send, or None and every problem found. Where the hub's documentation says "not shown",
the sandbox's choices (sandbox/README.md, "Customer data hub") are mirrored, so client and
service agree.
Choices of this module, where neither says anything:
- columns beyond the hub's documented fields are ignored, and so are unknown keys of order
  items; behavior `params` keep their extra fields (the hub allows them);
- a field absent from the row is absent from the body; a null one is sent as null;
- strings must be strings and numbers numbers (int, float or Decimal, Decimal sent as float);
  nothing is coerced; a whole-number field takes an integral Decimal or float and sends an int;
- a date-time is an aware `datetime` (a TIMESTAMPTZ column) or ISO 8601 text with an offset
  in any form Python reads (`T` or a space, `Z`, `+08`, `+08:00`, DuckDB's text of a
  TIMESTAMPTZ), sent as `isoformat()`; a naive one is refused, the field named;
  a date is a `date` or a YYYY-MM-DD string;
- `display_email` must look like `local@domain.tld`: a client rule, the service takes any text.
"""

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import partial
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StringConstraints,
    ValidationError,
)

from pipelines.clients.datahub import SUBMIT_OPERATIONS


@dataclass(frozen=True)
class Problem:
    field: str  # dotted path like the service's: "items.0.price", "data.custom_fields.cl_x"
    reason: str  # the rule broken, as a sentence without the field's name


#: The record types `validate_record` knows: those the data hub submits one by one.
RECORD_TYPES: tuple[str, ...] = tuple(SUBMIT_OPERATIONS)
IMPORT_KEYS = ("line_uid", "display_email", "display_mobile", "connect_id", "customer_id")
CUSTOM_FIELD_PREFIX = "cl_custom_"  # prefix of each key in `data.custom_fields`
CUSTOM_NUMBER_LIMIT = 2_147_483_647  # the hub's documented bounds of custom field values
CUSTOM_NUMBER_DIGITS = 15  # significant digits
CUSTOM_TEXT_LIMIT = 255  # characters

#: A date, then `T` or a space, then an hour: what makes text a date-time before Python reads it.
_DATE_TIME_TEXT = re.compile(r"[0-9]{4}-?[0-9]{2}-?[0-9]{2}[Tt ][0-9]{2}")
_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_CURRENCY = re.compile(r"[A-Z]{3}")
_E164 = re.compile(r"\+[1-9][0-9]{7,14}")  # "+", 8 to 15 digits, the first not 0 (sandbox)
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


# -- value rules: each returns the JSON-ready value or raises ValueError(reason) -----------


def _kind(value: object) -> str:
    names = {str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), f"a {type(value).__name__}")


def _number(value: object) -> int | float:
    """A JSON number; bool is an int to Python but never a number to JSON."""
    if type(value) is float and math.isfinite(value):  # nearly every value: no more to do
        return value
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError(f"must be a number, not {_kind(value)}")
    try:
        number = float(value)
    except (OverflowError, ValueError):  # a huge int, a signalling NaN
        number = math.nan
    if not math.isfinite(number):
        raise ValueError("must be a finite number, not NaN or infinity")
    return value if isinstance(value, int) else number


def _at_least(minimum: int, value: object) -> int | float:
    number = _number(value)
    if number < minimum:
        raise ValueError(f"must be at least {minimum}")
    return number


def _whole_number(minimum: int, value: object) -> int:
    number = _at_least(minimum, value)
    if number != int(number):
        raise ValueError("must be a whole number")
    return int(number)


def moment(value: object) -> datetime:
    """An aware date-time (the hub takes ISO 8601 with timezone) from a native timestamp or
    text; unix seconds and naive times are refused."""
    if isinstance(value, str):
        if not _DATE_TIME_TEXT.match(value):
            raise ValueError("must be an ISO 8601 date-time with timezone")
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("must be an ISO 8601 date-time with timezone") from None
    if not isinstance(value, datetime):
        raise ValueError(f"must be a date-time with timezone, not {_kind(value)}")
    if value.utcoffset() is None:
        raise ValueError("needs a timezone (ISO 8601 with offset)")
    return value


def _date_time(value: object) -> str:
    return moment(value).isoformat()


def _date(value: object) -> str:
    """YYYY-MM-DD, a real day."""
    if isinstance(value, datetime):
        raise ValueError("must be a date YYYY-MM-DD, not a date-time")
    if isinstance(value, str) and _DATE_TEXT.fullmatch(value):
        try:
            value = date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a day of the calendar") from None
    if not isinstance(value, date):
        raise ValueError("must be a date YYYY-MM-DD")
    return value.isoformat()


def _http_url(value: str) -> str:
    try:
        parts = urlsplit(value)
        absolute = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        absolute = False
    if not absolute or re.search(r"\s", value):
        raise ValueError("must be an absolute http(s) URL")
    return value


def _currency(value: object) -> str:
    if not isinstance(value, str) or not _CURRENCY.fullmatch(value):
        raise ValueError("must be three capital letters (ISO 4217), e.g. USD")
    return value


def _e164(value: object) -> str:
    if not isinstance(value, str) or not _E164.fullmatch(value):
        raise ValueError("must be E.164: '+' then 8 to 15 digits, the first not 0")
    return value


def _email(value: object) -> str:
    if not isinstance(value, str) or not _EMAIL.fullmatch(value):
        raise ValueError("must be an email address local@domain.tld")
    return value


def _json_ready(value: Any) -> Any:
    """Free-form params as JSON values: Decimal as float, dates ISO 8601, tuples as lists."""
    if isinstance(value, Mapping):
        return {str(key): _json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(item) for item in value]
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return math.nan if value.is_snan() else float(value)
    return value


def _non_finite(value: Any, path: str) -> Iterator[str]:
    """Paths of the NaN and infinite numbers in `value`, which JSON cannot carry."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite(item, f"{path}.{key}")
    elif isinstance(value, list):
        for position, item in enumerate(value):
            yield from _non_finite(item, f"{path}.{position}")
    elif isinstance(value, float) and not math.isfinite(value):
        yield path


def _json_object(value: object) -> dict[str, Any]:
    """An object, or a JSON text of one (a DuckDB JSON column)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError("must be a JSON object; the text is not JSON") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"must be an object, not {_kind(value)}")
    return _json_ready(value)


# -- field types ----------------------------------------------------------------------------


def text(low: int, high: int | None = None) -> Any:
    """A string of `low`..`high` characters."""
    return Annotated[str, StringConstraints(strict=True, min_length=low, max_length=high)]


def max_text(high: int | None = None) -> Any:
    """`string or null`, "max N": empty strings allowed, as the sandbox does."""
    return text(0, high) | None


def ids(most: int) -> Any:
    """`array of string or null`: at most `most` items, each max 64 characters."""
    return Annotated[list[text(0, 64)], Field(max_length=most)] | None


# `json_schema_input_type`: what the catalog shows as the column's type (`view_columns`).
DateTime = Annotated[str, PlainValidator(_date_time, json_schema_input_type=datetime)]
Date = Annotated[str, PlainValidator(_date, json_schema_input_type=date)]
Uri = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=2083), AfterValidator(_http_url)
]
Currency = Annotated[str, PlainValidator(_currency, json_schema_input_type=str)]
Number = Annotated[float, PlainValidator(_number, json_schema_input_type=float)]
NonNegative = Annotated[float, PlainValidator(partial(_at_least, 0))]
Count = Annotated[int, PlainValidator(partial(_whole_number, 1))]
ChannelType = Literal["line", "fb", "ig", "whatsapp", "email", "wccs", "others"]

# Views carry more columns than the hub's fields (keys, connection): ignored, not refused.
ROW = ConfigDict(extra="ignore")
OPEN = ConfigDict(extra="allow")  # behavior params: the hub allows extra fields


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


# -- behavior events (params names other than page_view's: the sandbox's) --------------------

Utm = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=256)] | None


class BehaviorEvent(BaseModel):
    model_config = ROW

    behavior: Literal[
        "page_view",
        "view_item",
        "add_to_cart",
        "remove_from_cart",
        "begin_checkout",
        "purchase",
        "user_engagement",
    ]
    utm_campaign: Utm = None
    utm_source: Utm = None
    utm_medium: Utm = None
    utm_content: Utm = None
    utm_term: text(0, 256)
    language: max_text(256) = None
    geography: max_text(256) = None
    params: Annotated[dict[str, Any], PlainValidator(_json_object, json_schema_input_type=dict)]


class BehaviorItem(BaseModel):
    model_config = OPEN

    item_id: text(1, 64)
    item_name: text(1, 255)
    price: NonNegative
    quantity: Count


class PageViewParams(BaseModel):
    model_config = OPEN

    page_path: text(1, 2083)
    page_title: text(0, 1024)
    page_view_id: text(1, 128)


class ItemParams(BaseModel):
    """view_item, add_to_cart, remove_from_cart, begin_checkout: products and currency."""

    model_config = OPEN

    currency: Currency
    items: Annotated[list[BehaviorItem], Field(min_length=1, max_length=200)]


class PurchaseParams(ItemParams):
    transaction_id: text(1, 128)
    revenue: NonNegative
    tax: NonNegative
    shipping: NonNegative


class UserEngagementParams(BaseModel):
    model_config = OPEN

    engagement_time_msec: Annotated[int, PlainValidator(partial(_whole_number, 0))]
    page_view_id: text(1, 128) | None = None


PARAMS_BY_BEHAVIOR: dict[str, type[BaseModel]] = {
    "page_view": PageViewParams,
    "view_item": ItemParams,
    "add_to_cart": ItemParams,
    "remove_from_cart": ItemParams,
    "begin_checkout": ItemParams,
    "purchase": PurchaseParams,
    "user_engagement": UserEngagementParams,
}


# -- contact profiles and imports ---------------------------------------------------------


class ProfileFields(BaseModel):
    """Contact profile fields except export-only ones; each nullable, null clears."""

    model_config = ROW

    customer_id: max_text() = None
    connect_id: max_text() = None
    full_name: max_text() = None
    display_name: max_text() = None
    display_email: Annotated[str, PlainValidator(_email, json_schema_input_type=str)] | None = None
    display_mobile: Annotated[str, PlainValidator(_e164, json_schema_input_type=str)] | None = None
    gender: Literal["male", "female", "unknown", "other"] | None = None
    birthday: Date | None = None
    region: max_text() = None
    city: max_text() = None
    address: max_text() = None
    company: max_text() = None
    member_level: max_text() = None


class ImportRow(ProfileFields):
    line_uid: max_text() = None


class ProfileTarget(BaseModel):
    """Who a profile update is for."""

    model_config = ROW

    # The hub lists seven channel types; profile updates support these five.
    channel_type: Literal["line", "fb", "ig", "whatsapp", "wccs"]
    # 128: the hub's bound for these ids in records; 1..128 is the sandbox's choice.
    external_channel_id: text(1, 128)
    external_member_id: text(1, 128)


#: Per record type, the models whose fields are its outbound view's columns (a view may carry
#: more: `connection`, the key columns of `pipelines/push/plan.py`, `cl_custom_<key>`).
VIEW_MODELS: dict[str, tuple[type[BaseModel], ...]] = {
    "member_import": (ImportRow,),
    "contact_profile": (ProfileTarget, ProfileFields),
    **{record_type: (model,) for record_type, model in RECORD_MODELS.items()},
    "behavior_event": (BehaviorEvent,),
}


#: Columns of a view that are not fields of its models: name, type, what it holds.
VIEW_COLUMNS = {
    "connection": ("string or null", "The data hub connection to send to (default `default`)."),
    "event_key": ("string", "Behavior events: the event's own key; each is sent once."),
    "import_key": ("string", "Member imports: the attribute a row is matched on."),
}
_KEY_COLUMNS = {"behavior_event": "event_key", "member_import": "import_key"}


def view_columns(record_type: str) -> list[tuple[str, str, str | None]]:
    """The columns validation reads from a record type's view: name, JSON type (`string`,
    `number`, `date-time`, ...; `or null` when it may be missing) and, for a fixed set of
    values, which."""
    extra = ["connection", *([_KEY_COLUMNS[record_type]] if record_type in _KEY_COLUMNS else [])]
    columns = {name: (name, *VIEW_COLUMNS[name]) for name in extra}
    for model in VIEW_MODELS[record_type]:
        schema = model.model_json_schema(mode="validation")
        for name, found in schema["properties"].items():
            options = found.get("anyOf", [found])
            kinds = [option.get("format", option.get("type", "any")) for option in options]
            values = next((option["enum"] for option in options if "enum" in option), None)
            described = "One of " + ", ".join(f"`{v}`" for v in values) + "." if values else None
            columns[name] = (name, " or ".join(dict.fromkeys(kinds)), described)
    return list(columns.values())


# -- pydantic errors as problems ---------------------------------------------------------------

_REASONS = {
    "missing": "is required",
    "string_type": "must be a string",
    "string_too_short": "must not be empty",  # every lower bound of a string is 1
    "bool_type": "must be a boolean (true or false)",
    "list_type": "must be a list",
    "model_type": "must be an object",
    "string_too_long": "must be at most {max_length} characters",
    "too_short": "must hold at least {min_length} items",
    "too_long": "must hold at most {max_length} items",
    "literal_error": "must be one of {expected}",
}


def _reason(error: Mapping[str, Any]) -> str:
    kind, context = error["type"], error.get("ctx", {})
    if kind != "missing" and error["input"] is None:
        return "must not be null"
    if kind == "value_error":
        return str(context["error"])
    template = _REASONS.get(kind)
    return template.format(**context) if template else error["msg"]


def _validated(
    model: type[BaseModel], values: Mapping[str, Any], prefix: tuple[str, ...] = ()
) -> tuple[dict | None, list[Problem]]:
    """The model's fields present in `values`, JSON-ready, or None and every problem."""
    try:
        return model.model_validate(dict(values)).model_dump(exclude_unset=True), []
    except ValidationError as exc:
        return None, [
            Problem(".".join(str(part) for part in (*prefix, *error["loc"])), _reason(error))
            for error in exc.errors()
        ]


# -- custom field values (the hub's profile update rules and bounds) -------------------------


def _custom_text(value: object, definition: Mapping[str, Any]) -> str:
    if not isinstance(value, str) or len(value) > CUSTOM_TEXT_LIMIT:
        raise ValueError(f"a text field takes a string of at most {CUSTOM_TEXT_LIMIT} characters")
    return value


def _custom_number(value: object, definition: Mapping[str, Any]) -> int | float:
    number = _number(value)
    if abs(number) > CUSTOM_NUMBER_LIMIT:
        raise ValueError(f"a number field takes values within +-{CUSTOM_NUMBER_LIMIT}")
    if len(Decimal(repr(number)).normalize().as_tuple().digits) > CUSTOM_NUMBER_DIGITS:
        raise ValueError(f"a number field takes at most {CUSTOM_NUMBER_DIGITS} significant digits")
    return number


def _option_key(value: object, definition: Mapping[str, Any]) -> str:
    """An active option's key; the hub refuses the option's name."""
    options = definition.get("options") or []
    by_key = {option["key"]: option for option in options}
    if isinstance(value, str) and value in by_key:
        if not by_key[value]["active"]:
            raise ValueError(f"option {value!r} is archived")
        return value
    named = [option["key"] for option in options if option.get("name") == value]
    if named:
        raise ValueError(f"takes the option key, not its name: send {named[0]!r}")
    active = sorted(key for key, option in by_key.items() if option["active"])
    raise ValueError(f"a single_select field takes an active option key: {', '.join(active)}")


CUSTOM_VALUE_RULES: dict[str, Callable[[object, Mapping[str, Any]], object]] = {
    "text": _custom_text,
    "number": _custom_number,
    "date": lambda value, _: _date(value),
    "datetime": lambda value, _: _date_time(value),
    "single_select": _option_key,
}


def _custom_value(definition: Mapping[str, Any] | None, value: object) -> object:
    if definition is None:
        raise ValueError("no custom field has this key")
    if not definition["active"]:
        raise ValueError("the custom field is archived")
    if value is None:
        return None  # null clears the field (the hub's rule)
    rule = CUSTOM_VALUE_RULES.get(definition["type"])
    if rule is None:
        raise ValueError(f"custom field type {definition['type']!r} is unknown to this client")
    return rule(value, definition)


def _custom_fields(
    row: Mapping[str, Any], definitions: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, object], list[Problem]]:
    """The row's `cl_custom_<key>` columns checked against the pulled definitions."""
    by_key = {definition["key"]: definition for definition in definitions}
    values: dict[str, object] = {}
    problems: list[Problem] = []
    for name, value in row.items():
        if not name.startswith(CUSTOM_FIELD_PREFIX):
            continue
        definition = by_key.get(name.removeprefix(CUSTOM_FIELD_PREFIX))
        try:
            values[name] = _custom_value(definition, value)
        except ValueError as exc:
            problems.append(Problem(f"data.custom_fields.{name}", str(exc)))
    return values, problems


def _behavior_event(row: Mapping[str, Any]) -> tuple[dict | None, list[Problem]]:
    event, problems = _validated(BehaviorEvent, row)
    # The params a behavior needs are checked even when other fields fail, to report them all.
    behavior = row.get("behavior")
    params_model = PARAMS_BY_BEHAVIOR.get(behavior) if isinstance(behavior, str) else None
    try:
        params = _json_object(row.get("params"))
    except ValueError:
        params = None  # already a problem of BehaviorEvent
    if params_model is None or params is None:
        return (None, problems) if problems else (event, [])
    checked, params_problems = _validated(params_model, params, prefix=("params",))
    reported = {problem.field for problem in params_problems}
    problems += params_problems + [
        Problem(field, "must be a finite number, not NaN or infinity")
        for field in _non_finite(params, "params")
        if field not in reported  # extra params: not checked by the model
    ]
    if problems:
        return None, problems
    return event | {"params": checked}, []


#: Each record type submitted one by one: a commerce record is its model; a behavior event's
#: params are checked by the model of its behavior.
_RECORD_VALIDATORS: dict[str, Callable[[Mapping[str, Any]], tuple[dict | None, list[Problem]]]] = {
    **{record_type: partial(_validated, model) for record_type, model in RECORD_MODELS.items()},
    "behavior_event": _behavior_event,
}


# -- the interface ------------------------------------------------------------------------------


def validate_record(record_type: str, row: Mapping[str, Any]) -> tuple[dict | None, list[Problem]]:
    """The JSON body of a commerce record or behavior event, or None with every problem."""
    if record_type not in _RECORD_VALIDATORS:
        raise ValueError(f"unknown record type {record_type!r}; one of {RECORD_TYPES}")
    return _RECORD_VALIDATORS[record_type](row)


def validate_profile_update(
    row: Mapping[str, Any], custom_fields: Sequence[Mapping[str, Any]]
) -> tuple[dict | None, list[Problem]]:
    """The body of a profile update: {channel_type, external_channel_id, external_member_id,
    data: {profile fields present in the row, custom_fields: {cl_custom_<key>: value}}}."""
    target, problems = _validated(ProfileTarget, row)
    data, data_problems = _validated(ProfileFields, row, prefix=("data",))
    custom, custom_problems = _custom_fields(row, custom_fields)
    problems += data_problems + custom_problems
    if problems:
        return None, problems
    if any(name.startswith(CUSTOM_FIELD_PREFIX) for name in row):
        data["custom_fields"] = custom
    return target | {"data": data}, []


def validate_import_row(
    row: Mapping[str, Any], import_key: str
) -> tuple[dict | None, list[Problem]]:
    """One object of an import's `data`; it must carry a value for `import_key`."""
    if import_key not in IMPORT_KEYS:
        return None, [Problem("import_key", f"must be one of {', '.join(IMPORT_KEYS)}")]
    body, problems = _validated(ImportRow, row)
    if row.get(import_key) in (None, ""):
        problems.append(Problem(import_key, "is the import key, so every row needs a value"))
    return (None, problems) if problems else (body, [])
