"""Contact profile updates: who an update is for (`ProfileTarget`), the profile fields
(`ProfileFields`, which the member import rows of pipelines/push/validation/members.py extend),
the rules of custom field values, and `validate_profile_update`.
"""

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, PlainValidator

from pipelines.push.validation.fields import (
    ROW,
    Date,
    Problem,
    a_number,
    e164,
    email_address,
    iso_date,
    iso_date_time,
    max_text,
    text,
    validated,
)

CUSTOM_FIELD_PREFIX = "cl_custom_"  # prefix of each key in `data.custom_fields`
CUSTOM_NUMBER_LIMIT = 2_147_483_647  # the hub's documented bounds of custom field values
CUSTOM_NUMBER_DIGITS = 15  # significant digits
CUSTOM_TEXT_LIMIT = 255  # characters


# -- contact profiles ---------------------------------------------------------------------


class ProfileFields(BaseModel):
    """Contact profile fields except export-only ones; each nullable, null clears."""

    model_config = ROW

    customer_id: max_text() = None
    connect_id: max_text() = None
    full_name: max_text() = None
    display_name: max_text() = None
    display_email: (
        Annotated[str, PlainValidator(email_address, json_schema_input_type=str)] | None
    ) = None
    display_mobile: Annotated[str, PlainValidator(e164, json_schema_input_type=str)] | None = None
    gender: Literal["male", "female", "unknown", "other"] | None = None
    birthday: Date | None = None
    region: max_text() = None
    city: max_text() = None
    address: max_text() = None
    company: max_text() = None
    member_level: max_text() = None


class ProfileTarget(BaseModel):
    """Who a profile update is for."""

    model_config = ROW

    # The hub lists seven channel types; profile updates support these five.
    channel_type: Literal["line", "fb", "ig", "whatsapp", "wccs"]
    # 128: the hub's bound for these ids in records; 1..128 is the sandbox's choice.
    external_channel_id: text(1, 128)
    external_member_id: text(1, 128)


# -- custom field values (the hub's profile update rules and bounds) -------------------------


def _custom_text(value: object, definition: Mapping[str, Any]) -> str:
    if not isinstance(value, str) or len(value) > CUSTOM_TEXT_LIMIT:
        raise ValueError(f"a text field takes a string of at most {CUSTOM_TEXT_LIMIT} characters")
    return value


def _custom_number(value: object, definition: Mapping[str, Any]) -> int | float:
    number = a_number(value)
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
    "date": lambda value, _: iso_date(value),
    "datetime": lambda value, _: iso_date_time(value),
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


# -- the interface ------------------------------------------------------------------------------


def validate_profile_update(
    row: Mapping[str, Any], custom_fields: Sequence[Mapping[str, Any]]
) -> tuple[dict | None, list[Problem]]:
    """The body of a profile update: {channel_type, external_channel_id, external_member_id,
    data: {profile fields present in the row, custom_fields: {cl_custom_<key>: value}}}."""
    target, problems = validated(ProfileTarget, row)
    data, data_problems = validated(ProfileFields, row, prefix=("data",))
    custom, custom_problems = _custom_fields(row, custom_fields)
    problems += data_problems + custom_problems
    if problems:
        return None, problems
    if any(name.startswith(CUSTOM_FIELD_PREFIX) for name in row):
        data["custom_fields"] = custom
    return target | {"data": data}, []
