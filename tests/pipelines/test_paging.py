"""Pagination strategies against lists that shift while they are read."""

import threading
import time

import pytest

from pipelines.pull.paging import Page, PagingError, cursor_pages, first_page_holding, offset_pages


class ShiftingList:
    """A newest-first list served by page/limit; `on_fetch` mutates it between pages.
    Fetches may come from read-ahead threads, so each is served whole under a lock."""

    def __init__(self, size: int, on_fetch=None) -> None:
        self.rows = list(range(size, 0, -1))  # ids; bigger is newer
        self.next_id = size + 1
        self.on_fetch = on_fetch
        self.fetches = 0
        self.pages: list[int] = []
        self._lock = threading.Lock()

    def insert_at_head(self, count: int) -> None:
        self.rows[:0] = list(range(self.next_id + count - 1, self.next_id - 1, -1))
        self.next_id += count

    def fetch(self, limit: int):
        def page(number: int) -> Page[int]:
            with self._lock:
                if self.on_fetch and self.fetches:
                    self.on_fetch(self, self.fetches)
                self.fetches += 1
                self.pages.append(number)
                return Page(self.rows[number * limit : (number + 1) * limit], len(self.rows))

        return page


def read_all(
    listing: ShiftingList, limit: int = 10, read_ahead: int = 0, batches: list | None = None
) -> list[int]:
    """The list read page by page. Without read-ahead by default: the shifting lists below
    change on every fetch, so the fetches must be the walk's own to be repeatable.
    `batches`, a list: the answers are decoded apart from their fetch, and each call's
    count of them is appended."""
    fetch, decode = listing.fetch(limit), list
    if batches is not None:
        fetch, decode = (
            (lambda number: ("answer", listing.fetch(limit)(number))),
            (lambda answers: batches.append(len(answers)) or [page for _, page in answers]),
        )
    pages = offset_pages(
        fetch, decode=decode, limit=limit, row_id=lambda row: row, read_ahead=read_ahead
    )
    return [row for page in pages for row in page]


@pytest.mark.parametrize("read_ahead", [0, 1, 2, 5])
def test_a_still_list_is_read_once_in_order(read_ahead):
    listing = ShiftingList(95)
    assert read_all(listing, read_ahead=read_ahead) == list(range(95, 0, -1))
    assert sorted(listing.pages) == list(range(10))  # each page once, none past the total


def test_rows_inserted_at_the_head_while_paging_are_not_doubled():
    listing = ShiftingList(100, on_fetch=lambda lst, n: lst.insert_at_head(3))
    got = read_all(listing)
    assert len(got) == len(set(got))
    assert set(range(1, 101)) <= set(got)


def test_rows_deleted_at_the_head_while_paging_lose_nothing_else():
    deleted: set[int] = set()

    def delete_newest(listing: ShiftingList, n: int) -> None:
        for _ in range(4 if n % 3 == 0 else 0):
            deleted.add(listing.rows.pop(0))

    listing = ShiftingList(100, on_fetch=delete_newest)
    got = read_all(listing)
    assert len(got) == len(set(got))
    assert set(range(1, 101)) - deleted <= set(got)


def test_inserts_and_deletes_together_lose_and_double_nothing():
    deleted: set[int] = set()

    def churn(listing: ShiftingList, n: int) -> None:
        if n % 3:
            return
        listing.insert_at_head(5)
        for _ in range(7 if n % 2 else 2):
            deleted.add(listing.rows.pop(0))

    listing = ShiftingList(200, on_fetch=churn)
    got = read_all(listing)
    assert len(got) == len(set(got))
    assert set(range(1, 201)) - deleted <= set(got)


def test_answers_read_ahead_are_decoded_together_once_each():
    """The answers that have arrived when the next page is asked for are decoded in one
    call with it; each page once, in order."""
    listing, batches = ShiftingList(95), []
    fetch = listing.fetch(10)
    rows = []
    for read, page in enumerate(
        offset_pages(
            lambda number: ("answer", fetch(number)),
            decode=lambda answers: batches.append(len(answers)) or [p for _, p in answers],
            limit=10,
            row_id=lambda row: row,
            read_ahead=4,
        )
    ):
        rows += page
        deadline = time.monotonic() + 30
        while listing.fetches < min(10, read + 5):  # the pages read ahead have arrived
            assert time.monotonic() < deadline
            time.sleep(0.001)
    assert rows == list(range(95, 0, -1))
    # Page 0 read alone, then pages 1-4 and 5-8 as they arrived together, page 9 alone
    # ([1, 4, 4, 1], but a thread may not have marked its answer arrived just yet).
    assert sum(batches) == 10 and batches[0] == 1 and len(batches) < 10


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("read_ahead", [1, 2, 4])
def test_read_ahead_over_a_shifting_list_loses_and_doubles_nothing(read_ahead, batched):
    """Pages read ahead were fetched before the list shifted again: they are used only when
    they are the next page asked for, so a step back drops them and fetches anew."""
    deleted: set[int] = set()

    def churn(listing: ShiftingList, n: int) -> None:
        if n % 4:
            return
        listing.insert_at_head(3)
        for _ in range(5 if n % 8 else 1):
            deleted.add(listing.rows.pop(0))

    listing = ShiftingList(300, on_fetch=churn)
    got = read_all(listing, read_ahead=read_ahead, batches=[] if batched else None)
    assert len(got) == len(set(got))
    assert set(range(1, 301)) - deleted <= set(got)


def test_a_list_that_shifts_on_every_fetch_fails_clearly_instead_of_spinning():
    def churn(listing: ShiftingList, n: int) -> None:
        listing.insert_at_head(5)
        for _ in range(7 if n % 2 else 2):
            listing.rows.pop(0)

    with pytest.raises(PagingError, match="shifts faster"):
        read_all(ShiftingList(200, on_fetch=churn))


@pytest.mark.parametrize("read_ahead", [0, 2])
def test_stop_ends_at_the_first_row_outside_the_window(read_ahead):
    listing = ShiftingList(100)
    pages = offset_pages(
        listing.fetch(10),
        limit=10,
        row_id=lambda row: row,
        stop=lambda row: row <= 55,
        read_ahead=read_ahead,
    )
    assert [row for page in pages for row in page] == list(range(100, 55, -1))
    # Pages 0-4 hold the window; read-ahead may have asked for at most its depth beyond the
    # last page that did not yet end past the window (page 3: rows 70..61).
    assert set(range(5)) <= set(listing.pages) <= set(range(max(5, 4 + read_ahead)))
    assert len(listing.pages) == len(set(listing.pages))


def test_first_page_holding_finds_the_window_by_binary_search():
    rows = list(range(1000, 0, -1))
    probes: list[int] = []

    def first_row(page: int):
        probes.append(page)
        return rows[page * 10] if page * 10 < len(rows) else None

    start = first_page_holding(first_row, pages=100, is_after_window=lambda row: row > 333)
    assert rows[start * 10] > 333 >= rows[(start + 1) * 10]
    assert len(probes) <= 8


def test_cursor_pages_follow_tokens_and_stop_on_a_loop():
    answers = {None: ([1, 2], "a"), "a": ([3], "b"), "b": ([4], "")}
    assert list(cursor_pages(lambda token: answers[token])) == [[1, 2], [3], [4]]
    looping = {None: ([1], "a"), "a": ([2], "b"), "b": ([3], "a")}
    with pytest.raises(PagingError, match="second time"):
        list(cursor_pages(lambda token: looping[token]))
