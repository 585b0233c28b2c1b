"""The footers a whole-window check reads are kept in the lake (pipelines/lake/footers.py): a later
call reads only the files written since, and a kept file that is damaged, missing or cannot
be written never changes an answer."""

from __future__ import annotations

import os
import threading
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.lake import Lake
from pipelines.lake.footers import FOLDER, Footer, footers
from pipelines.stream import Stream, connection_schema

EVENTS = Stream("test", "events", connection_schema([("id", pa.string())]), daily=True, key=("id",))
FIRST = date(2026, 1, 1)
DAYS = [FIRST + timedelta(days=n) for n in range(10)]
HOUR_NS = 3600 * 10**9


def land(lake: Lake, day: date, rows: int, written_ns: int) -> str:
    """A day file of `rows` rows, its time set to `written_ns`, as a landing long ago."""
    rows_of = [{"connection": "default", "id": f"{day}-{n}"} for n in range(rows)]
    lake.write(EVENTS, "default", rows_of, day=day, metadata={"pulled_at": f"{day}T23:00:00"})
    path = lake.path(EVENTS, "default", day)
    os.utime(path, ns=(written_ns, written_ns))
    return path


@pytest.fixture
def lake(tmp_path) -> Lake:
    lake = Lake(tmp_path)
    start = 1_700_000_000 * 10**9
    for n, day in enumerate(DAYS):
        land(lake, day, n + 1, start + n * HOUR_NS)
    return lake


def expected() -> dict[str, Footer]:
    return {n + 1: Footer(n + 1, f"{day}T23:00:00") for n, day in enumerate(DAYS)}


def read(lake: Lake, days=None) -> tuple[dict[int, Footer], int]:
    """The footers by rows (each day's count is distinct), and how many were read."""
    reads = []
    original = Lake.footer

    def counted(self, path):
        reads.append(path)
        return original(self, path)

    Lake.footer = counted
    try:
        found = footers(lake, EVENTS, lake.listing(EVENTS, days), days)
    finally:
        Lake.footer = original
    return {footer.rows: footer for footer in found.values()}, len(reads)


def kept_file(lake: Lake):
    return lake.root + f"/{FOLDER}/test/events.parquet"


def test_a_second_look_reads_only_the_files_written_since(lake):
    first, reads = read(lake)
    assert first == expected() and reads == len(DAYS)
    again, reads = read(lake)
    assert again == expected() and reads == 0
    # A day landed again is read again, with what it holds now.
    land(lake, DAYS[3], 40, 1_800_000_000 * 10**9)
    changed, reads = read(lake)
    assert changed[40] == Footer(40, f"{DAYS[3]}T23:00:00") and 4 not in changed
    assert reads == 1
    _, reads = read(lake)
    assert reads == 0


def test_a_look_at_some_days_keeps_what_was_kept_of_the_others(lake):
    read(lake)
    land(lake, DAYS[1], 20, 1_800_000_000 * 10**9)
    some, reads = read(lake, DAYS[:3])
    assert sorted(some) == [1, 3, 20] and reads == 1
    everything, reads = read(lake)
    assert reads == 0 and 20 in everything and 2 not in everything


def test_files_that_left_the_window_are_forgotten(lake):
    """A window of 3 days sliding over 10: each look reads the one day that entered, and
    the kept file holds the 3 days of the window, not every day it ever saw."""
    for start in range(len(DAYS) - 2):
        window = DAYS[start : start + 3]
        _, reads = read(lake, window)
        assert reads == (3 if start == 0 else 1)
        assert len(lake.read_table(kept_file(lake))) == 3
    # A file of the window no longer listed (set aside, say) is forgotten too.
    os.remove(lake.path(EVENTS, "default", DAYS[-1]))
    read(lake, DAYS[-3:])
    assert len(lake.read_table(kept_file(lake))) == 2


def test_a_file_written_again_within_its_second_is_read_again_by_its_size(lake):
    """An object store keeps whole seconds: two writes in one second have one time."""
    second = 1_900_000_000 * 10**9
    land(lake, DAYS[1], 60, second)
    read(lake)
    land(lake, DAYS[1], 70, second)  # written again, the same time to the ns
    found, reads = read(lake)
    assert 70 in found and 60 not in found and reads == 1


@pytest.mark.parametrize("damage", ["truncated", "not parquet", "other columns", "removed"])
def test_a_damaged_or_missing_kept_file_is_passed_over_and_written_again(lake, damage):
    read(lake)
    path = Path(kept_file(lake))
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "not parquet":
        path.write_bytes(b"not a parquet file at all")
    elif damage == "other columns":
        lake.put(str(path), pa.table({"path": ["x"], "rows": [1]}))
    else:
        path.unlink()
    found, reads = read(lake)
    assert found == expected() and reads == len(DAYS)
    _, reads = read(lake)
    assert reads == 0


def test_a_kept_file_that_cannot_be_written_changes_no_answer(lake, monkeypatch):
    def full_disk(self, path, table):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Lake, "put", full_disk)
    for _ in range(2):
        found, reads = read(lake)
        assert found == expected() and reads == len(DAYS)


def test_looks_at_once_each_get_every_footer_and_leave_a_readable_file(lake):
    answers, failures = [], []

    def look():
        try:
            answers.append(footers(lake, EVENTS, lake.listing(EVENTS), None))
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append(error)

    threads = [threading.Thread(target=look) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert all(sorted(f.rows for f in a.values()) == sorted(expected()) for a in answers)
    found, reads = read(lake)
    assert found == expected() and reads == 0
