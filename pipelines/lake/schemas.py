"""A response model's fields as Arrow columns, and a lake row filled from a model.

A stream whose row copies a model declares its columns as `arrow_fields(Model, ...)`
(`pipelines/streams/*/__init__.py`) and fills its rows with `model_row`, so each of those
fields is typed once: in the model (`pipelines/clients/*.py`). The mapping:

- `str` -> string, `int` -> int64, `float` -> float64, `bool` -> bool;
- `Day` (ISO 8601 date text) and `date` -> date32;
- `Moment` (ISO 8601 text) and `datetime` -> the lake's
  `TIMESTAMP` (`pipelines/stream.py`);
- `list[X]` -> a list of X's type; a nested model -> a struct of its fields;
- `dict`, `Any`, or a list of them -> string, holding JSON text;
- `X | None` and `NotRequired[X]` -> X's type.

A field's description (its attribute docstring, `descriptions`) goes with its column, in the
Arrow field's metadata (`DESCRIPTION`, `pipelines/lake/__init__.py`), for the catalog to show.

Every column is nullable, a field the service always sends too: the lake's files have always
been written so, and a Parquet column's nullability is part of its type.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import json
import sys
import types
from collections.abc import Collection, Iterable
from datetime import date, datetime
from typing import (
    Annotated,
    Any,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import pyarrow as pa
import pydantic

from pipelines.lake.drift import extra_of
from pipelines.stream import DESCRIPTION, EXTRA, TIMESTAMP

#: A date-time the service writes as ISO 8601 text. The model keeps the text (a time without
#: offset stays readable); the lake holds it as its `TIMESTAMP`.
Moment = Annotated[str, "ISO 8601 date-time"]
#: A calendar day the service writes as ISO 8601 text (`2026-10-01`); the lake holds a date.
Day = Annotated[str, "ISO 8601 date"]


def parse_moment(text: str | None) -> datetime | None:
    """An ISO 8601 date-time of a response, or None when the service gave none."""
    return datetime.fromisoformat(text) if text else None


_SCALARS = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}


def arrow_fields(model: type, *, exclude: Collection[str] = ()) -> list[pa.Field]:
    """The fields of `model` (a pydantic model or a TypedDict) in their order, as Arrow
    fields; `exclude`: the fields its row does not copy."""
    hints = _hints(model)
    unknown = set(exclude) - hints.keys()
    if unknown:
        raise ValueError(f"{model.__name__} has no fields {sorted(unknown)}")
    notes = descriptions(model)
    return [
        pa.field(
            name,
            arrow_type(hint),
            metadata={DESCRIPTION: notes[name]} if name in notes else None,
        )
        for name, hint in hints.items()
        if name not in exclude
    ]


def descriptions(model: type) -> dict[str, str]:
    """The fields of `model` (a pydantic model or a TypedDict) that say what they hold: the
    docstring below a field's annotation, in its class or a class it derives from (classes
    of a module's top level or nested in one; a class made inside a function has none).

    Read from the modules' source here rather than by pydantic (`use_attribute_docstrings`):
    on Python 3.11 pydantic finds each class's lines by walking the stack and asking
    `inspect.getmodule` of every frame, whose first answer resolves the real path of every
    module loaded (Dagster's included), then parses each class: a cost to every command's
    start (bench: peer), against one parse per module here."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        found |= _attribute_docstrings(cls.__module__).get(cls.__qualname__, {})
    return found


@functools.cache
def _attribute_docstrings(module: str) -> dict[str, dict[str, str]]:
    """Per class of `module` (by qualified name), its fields' attribute docstrings."""
    try:
        source = inspect.getsource(sys.modules[module])
    except (KeyError, OSError, TypeError):  # no source: a built-in, or made at run time
        return {}
    classes: dict[str, dict[str, str]] = {}

    def read(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if not isinstance(node, ast.ClassDef):
                continue
            name = prefix + node.name
            classes[name] = {
                field.target.id: inspect.cleandoc(doc.value.value)
                for field, doc in itertools.pairwise(node.body)
                if isinstance(field, ast.AnnAssign)
                and isinstance(field.target, ast.Name)
                and isinstance(doc, ast.Expr)
                and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str)
            }
            read(node.body, f"{name}.")

    read(ast.parse(source).body, "")
    return classes


def _hints(model: type) -> dict[str, Any]:
    if issubclass(model, pydantic.BaseModel):
        # `rebuild_annotation`: pydantic keeps a field's outer `Annotated` apart, as metadata.
        return {name: info.rebuild_annotation() for name, info in model.model_fields.items()}
    return get_type_hints(model, include_extras=True)


def arrow_type(hint: Any) -> pa.DataType:
    """The Arrow type of one field's annotation (see the module's docstring)."""
    if hint == Day or hint is date:
        return pa.date32()
    if hint == Moment or hint is datetime:
        return TIMESTAMP
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Annotated, Required, NotRequired):
        return arrow_type(args[0])
    if origin in (Union, types.UnionType):
        present = [arg for arg in args if arg is not type(None)]
        if len(present) == 1:
            return arrow_type(present[0])
    elif _is_json(hint):
        return pa.string()
    elif origin is list:
        return pa.list_(arrow_type(args[0]))
    elif hint in _SCALARS:
        return _SCALARS[hint]
    elif isinstance(hint, type) and issubclass(hint, pydantic.BaseModel):
        # The catalog describes top-level columns only.
        return pa.struct([field.remove_metadata() for field in arrow_fields(hint)])
    raise TypeError(f"no Arrow type for {hint!r} (pipelines/lake/schemas.py)")


def _is_json(hint: Any) -> bool:
    origin = get_origin(hint)
    return (
        hint is Any
        or hint is dict
        or origin is dict
        or (origin is list and _is_json(get_args(hint)[0]))
    )


def model_row(
    record: pydantic.BaseModel, fields: Iterable[pa.Field], *, extra: bool = True
) -> dict:
    """The columns among `fields` that `record`'s model declares, filled from it as
    `arrow_fields` maps them: date-time text parsed, a dict or a list of them as JSON text, a
    nested model as a struct; and `_extra`, what the record holds beyond them
    (`pipelines/lake/drift.py`), where `fields` has it and `extra` (False for a part of a row
    whose whole record gives it). The other columns are left to the caller."""
    declared = type(record).model_fields
    row = {
        field.name: _value(getattr(record, field.name), field.type)
        for field in fields
        if field.name in declared
    }
    if extra and any(field.name == EXTRA.name for field in fields):
        row[EXTRA.name] = extra_of(record)
    return row


def _value(value: Any, arrow: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_timestamp(arrow) and isinstance(value, str):
        return parse_moment(value)
    if pa.types.is_date32(arrow) and isinstance(value, str):
        return date.fromisoformat(value)
    if pa.types.is_string(arrow) and not isinstance(value, str):
        return json.dumps(value)
    if pa.types.is_list(arrow):
        return [_value(item, arrow.value_type) for item in value]
    if pa.types.is_struct(arrow):
        return model_row(value, arrow)
    return value
