"""The data hub's snapshot streams: custom fields and broadcasts, each listed whole in one call
and landed as the connection's file."""

from __future__ import annotations

from functools import partial

import pyarrow as pa

from pipelines.clients.datahub import Broadcast, CustomField, DataHub
from pipelines.lake.schemas import arrow_fields
from pipelines.stream import CONNECTION, EXTRA
from pipelines.streams.listed import listed_stream

#: A stream of one of the hub's lists.
listed = partial(listed_stream, DataHub.service)

CUSTOM_FIELDS = listed(
    "custom_fields",
    pa.schema([*arrow_fields(CustomField), CONNECTION, EXTRA]),
    # `active` unset lists archived fields too (the hub documents null as all).
    lambda client: client.list_custom_fields(active=None),
    description="Custom field definitions, archived ones included, with their options.",
)

BROADCASTS = listed(
    "broadcasts",
    pa.schema([*arrow_fields(Broadcast), CONNECTION, EXTRA]),
    lambda client: client.list_broadcasts(),
    description="Broadcasts, sent and scheduled.",
)
