"""Client-side validation of what the push pipeline sends to the data hub (the fields, bounds
and limits the hub documents), so a bad row is rejected with its field named before any request.
This module holds what every record type shares: `Problem`, the value rules, the field types and
pydantic's errors as problems; the record types use them in the other modules of
pipelines/push/validation/, and pipelines/push/validation/dispatch.py says which is which.

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
from collections.abc import Iterator, Mapping
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
    StringConstraints,
    ValidationError,
)


@dataclass(frozen=True)
class Problem:
    field: str  # dotted path like the service's: "items.0.price", "data.custom_fields.cl_x"
    reason: str  # the rule broken, as a sentence without the field's name


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


def a_number(value: object) -> int | float:
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
    number = a_number(value)
    if number < minimum:
        raise ValueError(f"must be at least {minimum}")
    return number


def whole_number(minimum: int, value: object) -> int:
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


def iso_date_time(value: object) -> str:
    return moment(value).isoformat()


def iso_date(value: object) -> str:
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


def e164(value: object) -> str:
    if not isinstance(value, str) or not _E164.fullmatch(value):
        raise ValueError("must be E.164: '+' then 8 to 15 digits, the first not 0")
    return value


def email_address(value: object) -> str:
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


def non_finite(value: Any, path: str) -> Iterator[str]:
    """Paths of the NaN and infinite numbers in `value`, which JSON cannot carry."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from non_finite(item, f"{path}.{key}")
    elif isinstance(value, list):
        for position, item in enumerate(value):
            yield from non_finite(item, f"{path}.{position}")
    elif isinstance(value, float) and not math.isfinite(value):
        yield path


def json_object(value: object) -> dict[str, Any]:
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
DateTime = Annotated[str, PlainValidator(iso_date_time, json_schema_input_type=datetime)]
Date = Annotated[str, PlainValidator(iso_date, json_schema_input_type=date)]
Uri = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=2083), AfterValidator(_http_url)
]
Currency = Annotated[str, PlainValidator(_currency, json_schema_input_type=str)]
Number = Annotated[float, PlainValidator(a_number, json_schema_input_type=float)]
NonNegative = Annotated[float, PlainValidator(partial(_at_least, 0))]
Count = Annotated[int, PlainValidator(partial(whole_number, 1))]
ChannelType = Literal["line", "fb", "ig", "whatsapp", "email", "wccs", "others"]

# Views carry more columns than the hub's fields (keys, connection): ignored, not refused.
ROW = ConfigDict(extra="ignore")
OPEN = ConfigDict(extra="allow")  # behavior params: the hub allows extra fields


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


def validated(
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
