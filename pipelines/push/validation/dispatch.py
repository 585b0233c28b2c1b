"""The table of record types: which the push validates one by one (`RECORD_TYPES`,
`validate_record`) and, per record type, the models whose fields are its outbound view's columns
(`view_columns`). The models are in pipelines/push/validation/commerce.py, behavior.py,
profiles.py, members.py and conversation.py.
"""

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from pydantic import BaseModel

from pipelines.clients import conversation, datahub
from pipelines.push.validation.behavior import BehaviorEvent, behavior_event_body
from pipelines.push.validation.commerce import RECORD_MODELS
from pipelines.push.validation.conversation import (
    ConversationAssignment,
    ConversationClose,
    assignment_body,
    close_body,
)
from pipelines.push.validation.fields import Problem, validated
from pipelines.push.validation.members import ImportRow
from pipelines.push.validation.profiles import ProfileFields, ProfileTarget

#: The record types `validate_record` knows: those the data hub and the conversation service
#: take one by one.
RECORD_TYPES: tuple[str, ...] = (
    *datahub.SUBMIT_OPERATIONS,
    *conversation.SUBMIT_OPERATIONS,
)


#: Per record type, the models whose fields are its outbound view's columns (a view may carry
#: more: `connection`, the key columns of `pipelines/push/plan.py`, `cl_custom_<key>`).
VIEW_MODELS: dict[str, tuple[type[BaseModel], ...]] = {
    "member_import": (ImportRow,),
    "contact_profile": (ProfileTarget, ProfileFields),
    **{record_type: (model,) for record_type, model in RECORD_MODELS.items()},
    "behavior_event": (BehaviorEvent,),
    "conversation_assignment": (ConversationAssignment,),
    "conversation_close": (ConversationClose,),
}


#: Columns of a view that are not fields of its models: name, type, what it holds.
VIEW_COLUMNS = {
    "connection": (
        "string or null",
        "The connection to send to: a region of the record type's service, `default` or "
        "`jp` (null: `default`).",
    ),
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
            if found.get("description"):  # the model's own words, the values after them
                described = " ".join(filter(None, (found["description"], described)))
            columns[name] = (name, " or ".join(dict.fromkeys(kinds)), described)
    return list(columns.values())


#: Each record type submitted one by one: a commerce record is its model; a behavior event's
#: params are checked by the model of its behavior.
_RECORD_VALIDATORS: dict[str, Callable[[Mapping[str, Any]], tuple[dict | None, list[Problem]]]] = {
    **{record_type: partial(validated, model) for record_type, model in RECORD_MODELS.items()},
    "behavior_event": behavior_event_body,
    "conversation_assignment": assignment_body,
    "conversation_close": close_body,
}


# -- the interface ------------------------------------------------------------------------------


def validate_record(record_type: str, row: Mapping[str, Any]) -> tuple[dict | None, list[Problem]]:
    """The JSON body of a commerce record, a behavior event, a conversation assignment or
    close, or None with every problem."""
    if record_type not in _RECORD_VALIDATORS:
        raise ValueError(f"unknown record type {record_type!r}; one of {RECORD_TYPES}")
    return _RECORD_VALIDATORS[record_type](row)
