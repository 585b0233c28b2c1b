"""The data hub's snapshot streams: custom fields and broadcasts, each listed whole in one call
and landed as the connection's file (`land_snapshot` in `pipelines/landing.py`).

Each function has the shape of that loop's `rows_of(transport, connection)` after the
service's settings (`DataHub`, for its path overrides); the loop adds the `connection` column.
"""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.clients.base import Connection
from pipelines.clients.datahub import DataHub
from pipelines.schemas import model_row
from pipelines.streams.datahub import BROADCASTS, CUSTOM_FIELDS
from pipelines.transport import Transport


def custom_field_rows(
    datahub: DataHub, transport: Transport, connection: Connection
) -> Iterator[dict]:
    # `active` unset lists archived fields too (the hub documents null as all).
    for field in datahub.client(transport).list_custom_fields(active=None):
        yield model_row(field, CUSTOM_FIELDS.schema)


def broadcast_rows(
    datahub: DataHub, transport: Transport, connection: Connection
) -> Iterator[dict]:
    for broadcast in datahub.client(transport).list_broadcasts():
        yield model_row(broadcast, BROADCASTS.schema)
