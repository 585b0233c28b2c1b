"""The mapping from a model's fields to Arrow columns, and rows filled from a model
(pipelines/lake/schemas.py), on small models of their own."""

from datetime import UTC, date, datetime
from typing import Any, NotRequired

import pyarrow as pa
import pytest
from typing_extensions import TypedDict

from pipelines.clients.base import Model
from pipelines.lake.schemas import Day, Moment, arrow_fields, model_row

#: The lake's date-time type, written out: a change to it must show here.
MOMENT = pa.timestamp("us", tz="UTC")


class Option(Model):
    id: int
    label: str | None = None


class Thing(Model):
    name: str
    count: int
    share: float | None = None
    active: bool
    seen_at: Moment | None = None
    tags: list[str]
    options: list[Option]
    settings: dict[str, Any] | None = None


class Logged(TypedDict):
    id: str
    note: NotRequired[str | None]
    at: Moment


def test_each_annotation_has_its_arrow_type_in_declaration_order():
    assert pa.schema(arrow_fields(Thing)) == pa.schema(
        [
            ("name", pa.string()),
            ("count", pa.int64()),
            ("share", pa.float64()),
            ("active", pa.bool_()),
            ("seen_at", MOMENT),
            ("tags", pa.list_(pa.string())),
            ("options", pa.list_(pa.struct([("id", pa.int64()), ("label", pa.string())]))),
            ("settings", pa.string()),  # JSON text
        ]
    )


def test_a_typed_dict_maps_alike():
    fields = arrow_fields(Logged, exclude=("note",))
    assert pa.schema(fields) == pa.schema([("id", pa.string()), ("at", MOMENT)])


def test_a_misspelt_exclusion_and_an_unmapped_type_are_refused():
    with pytest.raises(ValueError, match="no fields"):
        arrow_fields(Thing, exclude=("nmae",))

    class Odd(Model):
        value: set[int]

    with pytest.raises(TypeError, match="no Arrow type"):
        arrow_fields(Odd)


def test_a_row_is_filled_from_the_model_by_the_schemas_names():
    schema = pa.schema([*arrow_fields(Thing, exclude=("share",)), ("extra", pa.int64())])
    thing = Thing(
        name="a",
        count=2,
        active=True,
        seen_at="2026-10-01T10:00:00+09:00",
        tags=["x"],
        options=[{"id": 1}],
        settings={"k": [1, 2]},
    )

    row = model_row(thing, schema)

    assert row == {
        "name": "a",
        "count": 2,
        "active": True,
        "seen_at": datetime(2026, 10, 1, 1, 0, tzinfo=UTC),
        "tags": ["x"],
        "options": [{"id": 1, "label": None}],
        "settings": '{"k": [1, 2]}',
    }  # `extra` is the caller's; `share` was left out
    table = pa.Table.from_pylist([row | {"extra": 7}], schema=schema)
    assert table.column("seen_at").to_pylist() == [datetime(2026, 10, 1, 1, 0, tzinfo=UTC)]


class Described(Model):
    id: int
    """The thing's id."""
    name: str
    label: str | None = None
    """What the UI shows
    for it."""


class MoreDescribed(Described):
    later: int
    """Added by a later version."""


class DescribedLog(TypedDict):
    id: str
    """The log's id."""
    at: Moment


def test_a_fields_docstring_is_its_columns_description():
    """The docstring below a field, in its class or the class it derives from, a TypedDict's
    too; a field without one has no description."""

    def described(model: type) -> dict:
        return {f.name: (f.metadata or {}).get(b"description") for f in arrow_fields(model)}

    assert described(MoreDescribed) == {
        "id": b"The thing's id.",
        "name": None,
        "label": b"What the UI shows\nfor it.",
        "later": b"Added by a later version.",
    }
    assert described(DescribedLog) == {"id": b"The log's id.", "at": None}


class Trend(Model):
    date: Day
    count: int


def test_a_day_written_as_text_lands_as_a_date():
    schema = pa.schema(arrow_fields(Trend))
    assert schema == pa.schema([("date", pa.date32()), ("count", pa.int64())])
    assert model_row(Trend(date="2026-10-01", count=3), schema) == {
        "date": date(2026, 10, 1),
        "count": 3,
    }
