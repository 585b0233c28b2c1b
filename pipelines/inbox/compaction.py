"""What the compactions of the two inboxes into the lake share (`pipelines/webhooks/compaction.py`,
`pipelines/agent/compaction.py`): each day's files are named `inbox`, carry in their metadata
the uuid of the inbox they came from and the newest inbox ids they hold (the watermarks), and
are rewritten whole, from the inbox, when it holds newer rows of their day. Files compacted
from another inbox stop the run (`ForeignInbox`): a new inbox restarts ids at 1, so its
watermarks mean nothing beside the old ones. How far a compaction got over all days is kept
too (`pipelines/lake/watermarks.py`), so finding what is new reads the rows stored since,
not every day's file nor every row of the inbox."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from itertools import islice
from typing import Any, TypeVar

from pipelines.errors import SetupError
from pipelines.inbox.storage import Place
from pipelines.lake import Lake, watermarks
from pipelines.lake.watermarks import Watermark
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
    compacting the inbox (`compact`; the first carries the watermarks), where the inbox
    lives (`place`), and what it holds, in words."""

    name: str
    streams: tuple[Stream, ...]
    compact: Callable[[str, Lake, Log, Log], Compacted]
    place: Place
    holds: str

    @property
    def label(self) -> str:
        return ", ".join(stream.relation for stream in self.streams)

    def opened(self, lake_root: str) -> Any:
        """The inbox, None where there is none yet (a receiver makes it at its first row)."""
        return self.place.open(lake_root, create=False)

    def pending(self, inbox: Any, lake: Lake) -> str | None:
        """The inbox's newest id of each kind, in one name, while the lake's watermark is
        not at them (a sensor asks for one run per state); None when it is, or the inbox is
        empty. It reads those ids and the watermark's one file, however long the history:
        the run finds the days (`stale_days`)."""
        newest = inbox.newest()
        if not any(newest) or watermarks.read(lake, self.streams[0]) == Watermark(
            inbox.uuid, newest
        ):
            return None
        return "-".join(str(top) for top in newest)


def stale_days(
    inbox: Any, lake: Lake, stream: Stream, every_day: Callable[[], Mapping[date, T]]
) -> Mapping[date, T]:
    """The days whose files lack rows the inbox holds, with the inbox's newest id(s) of
    each: the days of the rows stored since `stream`'s watermark where it is this inbox's,
    else `every_day()`, which compares each landed day's file with the whole inbox (a first
    compaction, a watermark lost or forgotten, another inbox's)."""
    mark = watermarks.read(lake, stream)
    if mark is None or mark.source != inbox.uuid:
        return every_day()
    return inbox.day_watermarks(*mark.ids)


def compacted(lake: Lake, stream: Stream, inbox: Any, newest: tuple[int, ...]) -> None:
    """Keep `stream`'s watermark at `newest`: the inbox's ids read before its stale days
    were, so a row stored meanwhile is the next compaction's, never skipped."""
    watermarks.write(lake, stream, Watermark(inbox.uuid, newest))


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
