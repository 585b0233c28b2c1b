"""Pagination strategies: page/limit with `total` (and drift repair), and cursors.

Each is a generator of pages; the caller decides what a page holds. A strategy never
returns the same row twice and never skips one, even while the list shifts under it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Generic, TypeVar

from pipelines.errors import ServiceRefused

Row = TypeVar("Row")


@dataclass
class Page(Generic[Row]):
    rows: Sequence[Row]
    total: int


class PagingError(ServiceRefused):
    """Pages that cannot be right: a cursor seen twice, rows shifting faster than read."""


class _RecentIds:
    """At least the ids of the last `size` rows handed out: enough to drop re-read rows
    after a shift, bounded so memory never grows with the history. Two generations of
    plain sets: cheaper per row than an ordered, exactly bounded one."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._current: set[Hashable] = set()
        self._previous: set[Hashable] = set()

    def add(self, row_id: Hashable) -> bool:
        """Remember `row_id`; False if it was handed out already."""
        if row_id in self._current or row_id in self._previous:
            return False
        self._current.add(row_id)
        if len(self._current) >= self.size:
            self._previous, self._current = self._current, set()
        return True

    def fresh(self, rows: Sequence[Row], row_id: Callable[[Row], Hashable]) -> list[Row]:
        """The rows of `rows` not handed out yet, remembered. A page that repeats nothing
        (nearly every page) is taken with set operations: checking row by row cost a year of
        trigger logs much CPU (bench: peer)."""
        ids = list(map(row_id, rows))
        batch = set(ids)
        if (
            len(batch) == len(ids)
            and self._current.isdisjoint(batch)
            and self._previous.isdisjoint(batch)
        ):
            self._current |= batch
            if len(self._current) >= self.size:
                self._previous, self._current = self._current, set()
            return list(rows)
        return [row for row, each in zip(rows, ids, strict=True) if self.add(each)]


#: Pages requested ahead of the one being landed, so requests wait at the service while we
#: decode and write the last answers. Four land a year of trigger logs faster than two
#: (bench: pull). A walk that ends early has fetched at most this many pages for nothing.
READ_AHEAD_PAGES = 4


#: What a fetch returns before `decode` makes it a page: a page itself, unless a walk reads
#: its answers together (`offset_pages`).
Fetched = TypeVar("Fetched")


class _ReadAhead(Generic[Fetched, Row]):
    """Fetches the next pages in threads of their own while the caller lands this one. A
    page asked for that is not the next one read ahead (after a step back) is fetched
    again, in order, and what was read ahead is dropped: the list has shifted since. The
    answers read ahead by the time one is asked for are decoded with it, in one call."""

    def __init__(
        self,
        fetch: Callable[[int], Fetched],
        decode: Callable[[list[Fetched]], list[Page[Row]]],
        depth: int,
    ) -> None:
        self._fetch = fetch
        self._decode = decode
        self.depth = depth
        self._pool = ThreadPoolExecutor(max_workers=max(depth, 1), thread_name_prefix="read-ahead")
        self._ahead: deque[tuple[int, Future]] = deque()
        self._decoded: dict[int, Page[Row]] = {}

    def fetch(self, page_number: int) -> Page[Row]:
        if self._ahead and self._ahead[0][0] == page_number:
            _, future = self._ahead.popleft()
            if page_number not in self._decoded:
                self._decode_arrived(page_number, future)
            return self._decoded.pop(page_number)
        wait([future for _, future in self._ahead])  # their answers are unused
        self._ahead.clear()
        self._decoded.clear()
        return self._decode([self._fetch(page_number)])[0]

    def _decode_arrived(self, page_number: int, future: Future) -> None:
        """`page_number`'s answer, waited for, and with it those read ahead after it that
        have arrived: decoded together, kept until asked for."""
        numbers, fetched = [page_number], [future.result()]
        for number, ahead in self._ahead:
            if number in self._decoded or not ahead.done():
                break
            numbers.append(number)
            fetched.append(ahead.result())
        self._decoded.update(zip(numbers, self._decode(fetched), strict=True))

    def read_ahead(self, after: int, pages: int) -> None:
        """Have up to `depth` pages after `after` on their way, none past page `pages - 1`."""
        wanted = range(after + 1, min(after + 1 + self.depth, pages))
        queued = {number for number, _ in self._ahead}
        for number in wanted:
            if number not in queued:
                self._ahead.append((number, self._pool.submit(self._fetch, number)))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


#: Fetches in a row that end no further on than before, before paging gives up.
MAX_STALLED_FETCHES = 20


def offset_pages(
    fetch: Callable[[int], Page[Row]] | Callable[[int], Fetched],
    *,
    decode: Callable[[list[Fetched]], list[Page[Row]]] = list,
    limit: int,
    row_id: Callable[[Row], Hashable],
    start_page: int = 0,
    stop: Callable[[Row], bool] | None = None,
    memory_pages: int = 10,
    read_ahead: int = READ_AHEAD_PAGES,
) -> Iterator[list[Row]]:
    """Pages of a newest-first list served by `page`/`limit` with a `total`.

    New rows arrive at the head and rows can be deleted anywhere while we page. Rows ahead
    of our position shifting by d change `total` by d, and deletions behind it only lower
    `total`; so stepping back by every drop of `total` re-reads whatever moved up past us
    (a repeat is dropped by id), and a rise only causes repeats. `stop(row)` ends the walk
    at the first row outside the window (the list is ordered, so none follows).

    `read_ahead` pages are requested before they are needed, except past `total` or past
    a page whose last row is already outside the window. `decode`: the pages of answers
    `fetch` returned, given together as they arrive (by default `fetch` returns pages).
    """
    seen = _RecentIds(limit * memory_pages)
    reader = _ReadAhead(fetch, decode, read_ahead)
    try:
        offset = start_page * limit  # position of the next unread row, in the current numbering
        total: int | None = None
        furthest, stalled = offset, 0
        while True:
            page_number = offset // limit
            page = reader.fetch(page_number)
            stalled = stalled + 1 if offset <= furthest else 0
            furthest = max(furthest, offset)
            if stalled > MAX_STALLED_FETCHES:
                raise PagingError(
                    f"the list changed on each of {stalled} fetches in a row; it shifts faster "
                    "than it can be read, try again later"
                )
            if total is not None and page.total < total:
                step_back = total - page.total
                if step_back > limit * (memory_pages - 1):
                    raise PagingError(
                        f"{step_back} rows vanished while paging, more than can be re-read safely"
                    )
                offset = max(0, offset - step_back)
            total = page.total
            if offset < page_number * limit:
                continue  # rows that moved up sit on the page before: read it again
            past_window = stop is not None and bool(page.rows) and stop(page.rows[-1])
            if len(page.rows) == limit and not past_window:
                reader.read_ahead(page_number, pages=-(-total // limit))
            unread = page.rows[offset - page_number * limit :]
            # The list is ordered: the rows inside the window come first, found by bisection.
            inside = len(unread) if stop is None else bisect_left(unread, True, key=stop)
            done = inside < len(unread)
            fresh = seen.fresh(unread[:inside], row_id)
            if fresh:
                yield fresh
            offset = page_number * limit + len(page.rows)
            if done or len(page.rows) < limit or offset >= total:
                return
    finally:
        reader.close()


def first_page_holding(
    fetch_first_row: Callable[[int], Row | None],
    *,
    pages: int,
    is_after_window: Callable[[Row], bool],
) -> int:
    """The first page whose first row is not after the window, by binary search: a backfill
    of old days skips the newer rows in log2(pages) requests instead of reading them all."""
    low, high = 0, max(pages - 1, 0)
    while low < high:
        middle = (low + high + 1) // 2
        row = fetch_first_row(middle)
        if row is not None and is_after_window(row):
            low = middle
        else:
            high = middle - 1
    return low


def cursor_pages(
    fetch: Callable[[str | None], tuple[Sequence[Row], str | None]],
) -> Iterator[Sequence[Row]]:
    """Pages of a cursor-paginated list; `fetch(token)` returns the rows and the next token
    (None or "" at the end). A token seen twice is a loop on the service's side: stop with
    an error rather than land the same rows again."""
    token: str | None = None
    seen: set[str] = set()
    while True:
        rows, token = fetch(token)
        if rows:
            yield rows
        if not token:
            return
        if token in seen:
            raise PagingError(f"the cursor {token!r} came back a second time")
        seen.add(token)
