"""What the Dagster UI's catalog shows of a table: its columns, their types and what they hold
(docs/dagster.md). A stream's columns are its Arrow schema (and a daily stream's `date`,
`Stream.day`); a column's description is the one its declaration carries (`DESCRIPTION`,
`pipelines/stream.py`), which for a column copied from a response model is the model field's
docstring (`pipelines/schemas.py`)."""

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
