"""A snapshot stream that is one of its service's lists: the list asked for whole at every
pull, each item a row of the stream's schema (`model_row`: what the item holds beyond it is
kept in `_extra`), without the `connection` the landing adds."""

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
import pydantic

from pipelines.lake.schemas import model_row
from pipelines.pull.landing import PulledStream, Turn


def listed_stream(
    service: str,
    name: str,
    schema: pa.Schema,
    items: Callable[[Any], Iterable[pydantic.BaseModel]],
    **declared: Any,
) -> PulledStream:
    """The stream `<service>.<name>` whose rows are the items `items(client)` lists; what
    else a `PulledStream` declares (its description, key, upstream) is in `declared`."""

    def rows(turn: Turn) -> Iterator[dict]:
        for item in items(turn.client):
            yield model_row(item, turn.stream.schema)

    return PulledStream(service, name, schema, rows=rows, **declared)
