"""Custom field definitions of one region and the rules their values follow (spec section 4).

Type names are lower case, as the spec's sample `text`: `text`, `number`, `date`, `datetime`,
`single_select`.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from decimal import Decimal

import numpy as np

from sandbox.context import Sandbox
from sandbox.errors import invalid

PREFIX = "cl_custom_"  # spec section 4: keys in `custom_fields` carry this before the field key
NUMBER_LIMIT = 2_147_483_647
NUMBER_DIGITS = 15
TEXT_LIMIT = 255
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATETIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})"
)

# (key, name, type, active, description, options as (key, name, active))
CATALOG = (
    ("nickname", "Nickname", "text", True, "What the brand calls the member", ()),
    ("loyalty_points", "Loyalty points", "number", True, "Points from the loyalty program", ()),
    ("anniversary", "Membership anniversary", "date", True, "Day the member joined", ()),
    ("last_store_visit", "Last store visit", "datetime", True, "Latest check-in at a store", ()),
    (
        "preferred_store",
        "Preferred store",
        "single_select",
        True,
        "Store the member shops at",
        (
            ("flagship", "Flagship store", True),
            ("station_mall", "Station mall", True),
            ("airport", "Airport outlet", True),
            ("old_town", "Old town (closed)", False),
        ),
    ),
    (
        "skin_type",
        "Skin type",
        "single_select",
        True,
        "From the beauty quiz",
        (
            ("dry", "Dry", True),
            ("oily", "Oily", True),
            ("combination", "Combination", True),
            ("sensitive", "Sensitive", True),
        ),
    ),
    ("legacy_segment", "Legacy segment", "text", False, "Segment of the former CRM", ()),
    ("old_score", "Engagement score (old)", "number", False, "Retired scoring model", ()),
)


def definitions(sandbox: Sandbox, region: str) -> list[dict]:
    """The region's definitions; ids differ per region, like everything drawn from its seed."""
    rng = np.random.default_rng(sandbox.seed_for("datahub", region, "custom_fields"))
    field_id = int(rng.integers(1_000, 9_000))
    option_id = int(rng.integers(10_000, 90_000))
    slots: dict[str, int] = {}
    found = []
    for offset, (key, name, kind, active, description, options) in enumerate(CATALOG):
        slots[kind] = slots.get(kind, 0) + 1  # slots are numbered per type
        found.append(
            {
                "id": field_id + offset,
                "name": name,
                "key": key,
                "type": kind,
                "description": description,
                "slot_number": slots[kind],
                "active": active,
                "options": [
                    {
                        "id": option_id + 10 * offset + position,
                        "key": option_key,
                        "name": option_name,
                        "description": f"{name}: {option_name}",
                        "position": position,
                        "active": option_active,
                    }
                    for position, (option_key, option_name, option_active) in enumerate(options)
                ]
                if kind == "single_select"
                else None,
            }
        )
    return found


def checked_value(definition: dict, value: object, field: str) -> object:
    """The value to store for one custom field, or a 400 naming `field` (spec section 4)."""
    if value is None:
        return None  # null clears the field
    kind = definition["type"]
    if kind == "text":
        if not isinstance(value, str) or len(value) > TEXT_LIMIT:
            raise invalid(field, f"a text field takes a string of at most {TEXT_LIMIT} chars")
        return value
    if kind == "number":
        return _number(value, field)
    if kind == "date":
        if not isinstance(value, str) or not _DATE.fullmatch(value) or not _real_date(value):
            raise invalid(field, "a date field takes YYYY-MM-DD")
        return value
    if kind == "datetime":
        if not isinstance(value, str) or not _DATETIME.fullmatch(value) or not _aware(value):
            raise invalid(field, "a datetime field takes ISO 8601 with a timezone")
        return value
    keys = {option["key"] for option in definition["options"] if option["active"]}
    if not isinstance(value, str) or value not in keys:
        raise invalid(field, f"a single_select field takes an active option key: {sorted(keys)}")
    return value


def _number(value: object, field: str) -> int | float:
    # bool is an int to Python, never a number to JSON.
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise invalid(field, "a number field takes an integer or a float")
    if abs(value) > NUMBER_LIMIT:
        raise invalid(field, f"a number field takes values within +-{NUMBER_LIMIT}")
    digits = Decimal(repr(value)).normalize().as_tuple().digits
    if len(digits) > NUMBER_DIGITS:
        raise invalid(field, f"a number field takes at most {NUMBER_DIGITS} significant digits")
    return value


def _real_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _aware(text: str) -> bool:
    try:
        return datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False
