"""What the compactions of the two inboxes into the lake share (`pipelines/webhooks/compaction.py`,
`pipelines/agent/compaction.py`): each day's files are named `inbox`, carry in their metadata
the uuid of the inbox they came from and the newest inbox ids they hold (the watermarks), and
are rewritten whole, from the inbox, when it holds newer rows of their day. Files compacted
from another inbox stop the run (`ForeignInbox`): a new inbox restarts ids at 1, so its
watermarks mean nothing beside the old ones."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from itertools import islice
from typing import Any, TypeVar

from pipelines.errors import SetupError
from pipelines.inbox.storage import Place
from pipelines.lake import Lake
from pipelines.stream import Stream

#: The name of each day's file (the lake's "connection" slot): where its rows come from.
FILE_NAME = "inbox"
INBOX_UUID = "inbox_uuid"

T = TypeVar("T")


class ForeignInbox(SetupError):
    """The lake's files were compacted from another inbox: its ids mean nothing here."""


#: Where a compaction says what it did: a line for a person.
Log = Callable[[str], None]


@dataclass
class Compacted:
    """What a compaction did: the days it rewrote (a subclass adds its counts), the inbox
    it read (its location, or the path where none is yet) and the rows that inbox holds."""

    days: list[date] = field(default_factory=list)
    inbox: str = ""
    inbox_counts: dict[str, int] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        """Whether there was an inbox to compact (none is made before a receiver's first
        event)."""
        return bool(self.inbox_counts)

    def written(self) -> set[tuple[str, date | None]]:
        """What the compaction rewrote, as the warehouse's refresh is told it."""
        return {(stream.relation, day) for stream in self.rewritten() for day in self.days}

    def rewritten(self) -> tuple[Stream, ...]:
        raise NotImplementedError


@dataclass(frozen=True)
class InboxCompaction:
    """A receiver's inbox as a sync and a sensor know it: the relations it lands by
    compacting the inbox (`compact`), where the inbox lives (`place`), the days whose files
    lack what it holds, with its newest id of each kind for each (`stale_days`: an id, or a
    tuple of them), and what it holds, in words."""

    name: str
    streams: tuple[Stream, ...]
    compact: Callable[[str, Lake, Log, Log], Compacted]
    place: Place
    stale_days: Callable[[Any, Lake], Mapping[date, int | tuple[int, ...]]]
    holds: str

    @property
    def label(self) -> str:
        return ", ".join(stream.relation for stream in self.streams)

    def opened(self, lake_root: str) -> Any:
        """The inbox, None where there is none yet (a receiver makes it at its first row)."""
        return self.place.open(lake_root, create=False)

    @staticmethod
    def newest(stale: Mapping[date, int | tuple[int, ...]]) -> str:
        """The state `stale_days` found, in one name: the newest id of each kind over every
        stale day (a sensor asks for one run per state)."""
        ids = [top if isinstance(top, tuple) else (top,) for top in stale.values()]
        return "-".join(str(max(kind)) for kind in zip(*ids, strict=True))


def landed(lake: Lake, stream: Stream) -> dict[date, dict[str, str]]:
    """The metadata of each landed day's file of `stream`."""
    return {
        day: lake.read_metadata(lake.path(stream, FILE_NAME, day))
        for day in lake.days(stream, FILE_NAME)
    }


def foreign(inbox_uuid: str, *landed_days: Mapping[date, Mapping[str, str]]) -> set[str]:
    """The other inboxes the days (each stream's `landed`) were compacted from."""
    uuids = {metadata.get(INBOX_UUID, "") for days in landed_days for metadata in days.values()}
    return uuids - {inbox_uuid}


def day_metadata(inbox_uuid: str, watermarks: Mapping[str, int]) -> dict[str, str]:
    """The metadata of a day's files compacted now up to `watermarks`."""
    return {
        INBOX_UUID: inbox_uuid,
        **{name: str(top) for name, top in watermarks.items()},
        "compacted_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def storable(text: str | None) -> str | None:
    """`text`, with what UTF-8 cannot encode written as escapes: storable whatever it is."""
    return None if text is None else text.encode("utf-8", "backslashreplace").decode("utf-8")


def chunks(rows: Iterator[T], size: int) -> Iterator[list[T]]:
    """`rows`, `size` at a time."""
    while chunk := list(islice(rows, size)):
        yield chunk
