"""Pagination strategies: page/limit with `total` (and drift repair), and cursors.

Each is a generator of pages; the caller decides what a page holds. A strategy never
returns the same row twice and never skips one, even while the list shifts under it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Row = TypeVar("Row")


@dataclass
class Page(Generic[Row]):
    rows: Sequence[Row]
    total: int


class PagingError(Exception):
    pass


class _RecentIds:
    """The ids of the last `size` rows handed out: enough to drop re-read rows after a
    shift, bounded so memory never grows with the history."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._ids: OrderedDict[Hashable, None] = OrderedDict()

    def add(self, row_id: Hashable) -> bool:
        """Remember `row_id`; False if it was handed out already."""
        if row_id in self._ids:
            return False
        self._ids[row_id] = None
        while len(self._ids) > self.size:
            self._ids.popitem(last=False)
        return True


#: Fetches in a row that end no further on than before, before paging gives up.
MAX_STALLED_FETCHES = 20


def offset_pages(
    fetch: Callable[[int], Page[Row]],
    *,
    limit: int,
    row_id: Callable[[Row], Hashable],
    start_page: int = 0,
    stop: Callable[[Row], bool] | None = None,
    memory_pages: int = 10,
) -> Iterator[list[Row]]:
    """Pages of a newest-first list served by `page`/`limit` with a `total`.

    New rows arrive at the head and rows can be deleted anywhere while we page. Rows ahead
    of our position shifting by d change `total` by d, and deletions behind it only lower
    `total`; so stepping back by every drop of `total` re-reads whatever moved up past us
    (a repeat is dropped by id), and a rise only causes repeats. `stop(row)` ends the walk
    at the first row outside the window (the list is ordered, so none follows).
    """
    seen = _RecentIds(limit * memory_pages)
    offset = start_page * limit  # position of the next unread row, in the current numbering
    total: int | None = None
    furthest, stalled = offset, 0
    while True:
        page_number = offset // limit
        page = fetch(page_number)
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
        fresh = []
        done = False
        for row in page.rows[offset - page_number * limit :]:
            if stop is not None and stop(row):
                done = True
                break
            if seen.add(row_id(row)):
                fresh.append(row)
        if fresh:
            yield fresh
        offset = page_number * limit + len(page.rows)
        if done or len(page.rows) < limit or offset >= total:
            return


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
