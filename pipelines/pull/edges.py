"""The days beyond a range backfill's edges, against the service.

A backfill of `start`..`end` replaces those days whole, and leaves the days around them as
landed. Where the service's rows moved between days since (a log's `created_at` as served:
a sandbox started again with another anchor, a correction at the service), a row that moved
across an edge is then twice in the lake (in the new day inside, in the old one beyond) or
in neither, and every view over the range's edge is off by it.

So after the range lands, the `LOOK_DAYS` landed days beyond each edge are compared with
the service's own count of them (`PulledStream.day_counts`: for trigger logs one request a
connection while the daily stats reach them). On each side:

- all equal: the edge holds, nothing is said;
- only the nearest differs (rows moved across the edge, nowhere else): that day is landed
  again, and said in one line;
- a farther one differs: rows moved across more than the edge, likely everywhere (another
  anchor), so the lake on that side is off as far as it reaches. Nothing more is landed
  unasked; one line names the sync that lands the side whole.

A count can match by chance while rows differ (as many moved in as out): looking at several
days, not the nearest alone, makes a shift of the whole history show on one of them.

Nothing is compared where it cannot be: a day no connection holds (nothing landed there can
be off), a day older than the service serves, a stream without a count, the open day (today:
it keeps changing). A right edge landed again next to today lands today too, as the next sync
would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta

from pipelines.clients.base import Service
from pipelines.lake import Lake, file_day, file_stem
from pipelines.pull.landing import PulledStream, served_days
from pipelines.transport import CallStats

#: Landed days beyond each edge of a range compared with the service: the nearest, and
#: three more to tell rows moved across the edge from rows moved everywhere.
LOOK_DAYS = 4

ONE_DAY = timedelta(days=1)


@dataclass(frozen=True)
class Apart:
    """A landed day beyond a range's edge whose rows differ from the service's count: the
    sums over the connections that hold it (one differing is enough)."""

    day: date
    lake: int
    service: int


def apart_days(
    stream: PulledStream, service: Service, lake: Lake, days: list[date], today: date
) -> list[Apart]:
    """The `days` whose landed rows differ from the service's count, in their order: one
    count per connection that holds any of them. A day the service's count kept moving for
    is not among them."""
    if stream.day_counts is None or not days:
        return []
    held: dict[tuple[str, date], int] = {
        (file_stem(path), file_day(path)): lake.footer(path).num_rows
        for path in lake.files(stream, days)
    }
    found: dict[date, Apart] = {}
    for connection in service.connections:
        mine = [day for day in days if (connection.name, day) in held]
        if not mine:
            continue
        with service.transport(connection, CallStats()) as transport:
            counts = stream.day_counts(service.client(transport), mine, today)
        for day in mine:
            rows = held[(connection.name, day)]
            if day in counts and counts[day] != rows:
                seen = found.get(day, Apart(day, 0, 0))
                found[day] = Apart(day, seen.lake + rows, seen.service + counts[day])
    return [found[day] for day in days if day in found]


def beyond(
    stream: PulledStream, lake: Lake, edge: date, step: timedelta, today: date
) -> list[date]:
    """Up to `LOOK_DAYS` days from `edge` outwards by `step` that can be compared: closed,
    still served, and held by a connection; the first that is not ends them."""
    days = []
    for n in range(LOOK_DAYS):
        day = edge + n * step
        if day >= today or not served_days(stream, [day], today)[0]:
            break
        if not lake.files(stream, [day]):
            break
        days.append(day)
    return days


@dataclass
class Edges:
    """What a range's edges came to: the days landed again, and those found apart farther
    out, with the days to land for them (`rest`)."""

    relation: str
    range: tuple[date, date]
    mended: list[Apart] = field(default_factory=list)
    farther: list[Apart] = field(default_factory=list)
    rest: tuple[date, date] | None = None

    def notes(self) -> list[str]:
        """One line for the days landed again, one for the sides to land whole: nothing when
        the edges held."""
        lines = []
        span = f"{self.range[0]}..{self.range[1]}"
        if self.mended:
            lines.append(
                f"{self.relation}: {_days(self.mended)} beyond {span} differed from the "
                "service: landed again"
            )
        if self.rest:
            first, last = self.rest
            differ = "differs" if len(self.farther) == 1 else "differ"
            lines.append(
                f"{self.relation}: {_days(self.farther)} beyond {span} {differ} from the "
                f"service: its rows moved across more than the range's edges; run `python -m "
                f"cli sync --streams {self.relation} --start {first} --end {last}`"
            )
        return lines


def mend_edges(
    stream: PulledStream,
    service: Service,
    lake: Lake,
    days: list[date],
    today: date,
    land: Callable[[list[date]], bool],
) -> Edges:
    """Compare the days beyond `days`' edges with the service; land again (`land`, True when
    it landed) a nearest day that alone differs, and name the sync for a side that differs
    farther out (see the module's docstring)."""
    edges = Edges(stream.relation, (days[0], days[-1]))
    left, right = False, False
    for step, edge in ((-ONE_DAY, days[0] - ONE_DAY), (ONE_DAY, days[-1] + ONE_DAY)):
        found = apart_days(stream, service, lake, beyond(stream, lake, edge, step, today), today)
        if not found:
            continue
        if [a.day for a in found] != [edge]:
            edges.farther += found
            left, right = left or step < ONE_DAY, right or step == ONE_DAY
            continue
        # A right edge next to today: what moved across it may have reached today.
        again = [edge, today] if edge + step == today else [edge]
        if land(sorted(again)):  # a failure is the sync's to tell
            edges.mended += found
    if left or right:
        held = [file_day(path) for path in lake.files(stream)]
        oldest = today - timedelta(days=(stream.served_days or stream.history_days) - 1)
        first = max(min(held), oldest) if left else edges.range[1] + ONE_DAY
        last = max(held) if right else edges.range[0] - ONE_DAY
        edges.rest = (first, last)
    return edges


def _days(days: list[Apart]) -> str:
    """The days with their figures: `day 2026-03-01 (lake 12, service 10)`."""
    named = [f"{a.day} (lake {a.lake}, service {a.service})" for a in sorted(days, key=_day)]
    if len(named) == 1:
        return f"day {named[0]}"
    return f"days {', '.join(named[:-1])} and {named[-1]}"


def _day(apart: Apart) -> date:
    return apart.day
