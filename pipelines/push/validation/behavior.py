"""Behavior events: the event's model, the model of each behavior's params
(`PARAMS_BY_BEHAVIOR`) and `behavior_event_body`, which checks both;
pipelines/push/validation/dispatch.py calls it for the record type `behavior_event`.
"""

from collections.abc import Mapping
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PlainValidator, StringConstraints

from pipelines.push.validation.fields import (
    OPEN,
    ROW,
    Count,
    Currency,
    NonNegative,
    Problem,
    json_object,
    max_text,
    non_finite,
    text,
    validated,
    whole_number,
)

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
    params: Annotated[dict[str, Any], PlainValidator(json_object, json_schema_input_type=dict)]


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

    engagement_time_msec: Annotated[int, PlainValidator(partial(whole_number, 0))]
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


def behavior_event_body(row: Mapping[str, Any]) -> tuple[dict | None, list[Problem]]:
    event, problems = validated(BehaviorEvent, row)
    # The params a behavior needs are checked even when other fields fail, to report them all.
    behavior = row.get("behavior")
    params_model = PARAMS_BY_BEHAVIOR.get(behavior) if isinstance(behavior, str) else None
    try:
        params = json_object(row.get("params"))
    except ValueError:
        params = None  # already a problem of BehaviorEvent
    if params_model is None or params is None:
        return (None, problems) if problems else (event, [])
    checked, params_problems = validated(params_model, params, prefix=("params",))
    reported = {problem.field for problem in params_problems}
    problems += params_problems + [
        Problem(field, "must be a finite number, not NaN or infinity")
        for field in non_finite(params, "params")
        if field not in reported  # extra params: not checked by the model
    ]
    if problems:
        return None, problems
    return event | {"params": checked}, []
