"""Stored webhook events into the lake: `datahub/webhook_events/date=D/inbox.parquet`.

Each day's file holds every inbox event of that UTC day up to a row id, and says which in its
metadata (`inbox_max_id`). A day is rewritten whole, from the inbox, when the inbox holds a
newer row for it. Because inbox ids only grow in commit order, an event stored while a
compaction runs has a higher id than the file just written, so the next run picks it up:
compaction is idempotent and never loses an event, with no state beside the files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

import pyarrow as pa

from pipelines.lake import Lake, Stream
from pipelines.webhooks.inbox import Inbox, StoredEvent

TIMESTAMP = pa.timestamp("us", tz="UTC")
WEBHOOK_EVENTS = Stream(
    "datahub",
    "webhook_events",
    pa.schema(
        [
            ("idempotency_key", pa.string()),
            ("event", pa.string()),
            ("timestamp", TIMESTAMP),
            ("source", pa.string()),
            ("event_id", pa.string()),
            ("data", pa.string()),  # the envelope's `data`, JSON text
            ("received_at", TIMESTAMP),
        ]
    ),
    daily=True,
    key=("idempotency_key",),
)
#: The name of each day's file (the lake's "connection" slot): where its rows come from.
FILE_NAME = "inbox"
WATERMARK = "inbox_max_id"
INBOX_UUID = "inbox_uuid"


class ForeignInbox(Exception):
    """The lake's files were compacted from another inbox: its ids mean nothing here."""


@dataclass
class Compaction:
    days: list[date] = field(default_factory=list)
    rows: int = 0


def compacted(lake: Lake) -> dict[date, tuple[str, int]]:
    """Per landed day: the inbox it came from and the newest inbox id it holds."""
    found = {}
    for day in lake.days(WEBHOOK_EVENTS, FILE_NAME):
        metadata = lake.read_metadata(lake.path(WEBHOOK_EVENTS, FILE_NAME, day))
        found[day] = (metadata.get(INBOX_UUID, ""), int(metadata.get(WATERMARK, 0)))
    return found


def stale_days(inbox: Inbox, lake: Lake) -> dict[date, int]:
    """Days whose file lacks events the inbox holds, with the inbox's newest id for each."""
    landed = compacted(lake)
    foreign = {uuid for uuid, _ in landed.values()} - {inbox.uuid}
    if foreign:
        # A new inbox restarts ids at 1: comparing them with the old watermarks would skip
        # its events, and rewriting the days from it would drop the old inbox's.
        raise ForeignInbox(
            f"{lake.stream_dir(WEBHOOK_EVENTS)} was compacted from inbox(es) {sorted(foreign)}, "
            f"not from {inbox.path} ({inbox.uuid}); move those files aside or point "
            "WEBHOOK_INBOX at the inbox they came from"
        )
    return {
        day: top for day, top in inbox.day_watermarks().items() if top > landed.get(day, ("", 0))[1]
    }


def _rows(events: Iterator[StoredEvent]) -> Iterator[dict]:
    for event in events:
        data = json.loads(event.body)["data"]
        yield {
            "idempotency_key": event.idempotency_key,
            "event": event.event,
            "timestamp": event.timestamp,
            "source": event.source,
            "event_id": event.event_id,
            "data": json.dumps(data, ensure_ascii=False, separators=(",", ":")),
            "received_at": event.received_at,
        }


def compact(inbox: Inbox, lake: Lake) -> Compaction:
    """Rewrite every stale day from the inbox; a day's file is replaced atomically."""
    done = Compaction()
    for day, top in sorted(stale_days(inbox, lake).items()):
        metadata = {
            INBOX_UUID: inbox.uuid,
            WATERMARK: str(top),
            "compacted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        done.rows += lake.write(
            WEBHOOK_EVENTS, FILE_NAME, _rows(inbox.events_of(day, top)), day, metadata
        )
        done.days.append(day)
    return done
