"""The data hub's snapshot streams: custom fields and broadcasts, each listed whole in one call
and landed as the connection's file."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from pipelines.clients.datahub import Broadcast, CustomField, DataHub
from pipelines.lake.schemas import arrow_fields, model_row
from pipelines.pull.landing import PulledStream, Turn
from pipelines.stream import CONNECTION, EXTRA


def custom_field_rows(turn: Turn) -> Iterator[dict]:
    # `active` unset lists archived fields too (the hub documents null as all).
    for field in turn.client.list_custom_fields(active=None):
        yield model_row(field, turn.stream.schema)


CUSTOM_FIELDS = PulledStream(
    DataHub.service,
    "custom_fields",
    pa.schema([*arrow_fields(CustomField), CONNECTION, EXTRA]),
    rows=custom_field_rows,
    description="Custom field definitions, archived ones included, with their options.",
)


def broadcast_rows(turn: Turn) -> Iterator[dict]:
    for broadcast in turn.client.list_broadcasts():
        yield model_row(broadcast, turn.stream.schema)


BROADCASTS = PulledStream(
    DataHub.service,
    "broadcasts",
    pa.schema([*arrow_fields(Broadcast), CONNECTION, EXTRA]),
    rows=broadcast_rows,
    description="Broadcasts, sent and scheduled.",
)
