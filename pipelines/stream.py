"""What a stream is, declared once in `pipelines/streams/`: its service, name, Arrow schema
(each column with its description), key and partitioning. The lake (`pipelines/lake/__init__.py`)
stores it; the catalog (`assets/catalog.py`) describes it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

#: The lake's one date-time type: UTC, in microseconds (what pyarrow builds from a Python
#: datetime fastest, and DuckDB's own unit). Every stream's date-times are of this type.
TIMESTAMP = pa.timestamp("us", tz="UTC")
#: The key of a column's description in its Arrow field's metadata: the catalog reads it
#: (`assets/catalog.py`); the lake's files are written without it.
DESCRIPTION = b"description"


@dataclass(frozen=True)
class Stream:
    """What the lake needs to know about one stream."""

    service: str
    name: str
    schema: pa.Schema
    daily: bool = False
    #: The column(s) that identify a row within one connection.
    key: tuple[str, ...] = ("id",)
    #: Daily streams: how many days up to today a sync of an empty lake pulls (what the
    #: service still serves).
    history_days: int = 1
    #: Daily streams: how many days up to today the service answers for; an older day can
    #: no longer be pulled (its landed file, if any, stays). None: no limit documented.
    served_days: int | None = None
    #: Daily streams: what the `date` its relations read from the folders is the day of.
    day: str = "The UTC day of the row's file (the partition)."
    #: Bookkeeping written a file per run and merged into few (`pipelines/lake/merge.py`):
    #: its relations read each row once while a merge's file and the files it replaces are
    #: both in the lake (`pipelines/lake/__init__.py`, `parquet_read`).
    merged: bool = False
    #: Written by others, not the product (a `WAREHOUSE_SQL` source it does not define,
    #: pipelines/warehouse/__init__.py): every Parquet file its views read is its.
    written_by_others: bool = False

    @property
    def relation(self) -> str:
        return f"{self.service}.{self.name}"


def described(name: str, arrow: pa.DataType, description: str) -> pa.Field:
    """A column written out in a stream's declaration, with what it holds."""
    return pa.field(name, arrow, metadata={DESCRIPTION: description})


#: The column every pulled row carries.
CONNECTION = described(
    "connection", pa.string(), "The connection the row was pulled through (a workspace or region)."
)


#: The column every pulled row carries last: what the service sent that the stream's declared
#: schema does not hold, as JSON (`pipelines/lake/drift.py`); null when the row matched it.
EXTRA = described(
    "_extra",
    pa.string(),
    "What the service sent that the declared columns do not hold, as a JSON object: `new` "
    "fields by path (`stats.shares`) with their values, `retyped` values that did not fit "
    "their column's type (the column is null, or the value converted), and the declared "
    "fields the row lacked (`missing`). Null when the row matched its schema.",
)


def connection_schema(fields: Iterable[pa.Field | tuple[str, pa.DataType]]) -> pa.Schema:
    """A pulled stream's schema: its fields between the `connection` and the `_extra` every
    row carries (fields of a model, `pipelines/lake/schemas.py`, or written out)."""
    return pa.schema([CONNECTION, *fields, EXTRA])
