"""`Lake.writer`: a file appears under its name only if its block and its last flush succeed,
and a failed write leaves neither a temporary file nor a changed target."""

from collections.abc import Iterator
from datetime import date

import pyarrow as pa
import pytest

from pipelines import lake as lake_module
from pipelines.lake import TEMPORARY_SUFFIX, Lake, Stream

THINGS = Stream("test", "things", pa.schema([("id", pa.string())]), daily=True)
DAY = date(2026, 11, 1)
#: A lone surrogate: a Python str that UTF-8, so Arrow, refuses.
UNENCODABLE = {"id": "\ud800"}


class Interrupted(Exception):
    pass


def good(n: int) -> Iterator[dict]:
    return ({"id": f"new-{i}"} for i in range(n))


def failing_block(n: int) -> Iterator[dict]:
    yield from good(n)
    raise Interrupted("the source failed mid-write")


FAILED_WRITES = {
    # The only buffer fails in the flush that closes the file (the block itself succeeds).
    "a bad row in the last flush": (lambda: [*good(3), UNENCODABLE], UnicodeEncodeError),
    # One full row group written, then the next fails in the block.
    "a bad row after a row group": (
        lambda: [*good(lake_module.ROW_GROUP_ROWS), UNENCODABLE, *good(lake_module.ROW_GROUP_ROWS)],
        UnicodeEncodeError,
    ),
    # Good rows buffered, then the block raises: its error is the one reported.
    "the block raises": (lambda: failing_block(3), Interrupted),
}


@pytest.mark.parametrize("case", FAILED_WRITES)
def test_a_failed_write_leaves_no_temporary_file_and_the_old_file_unchanged(tmp_path, case):
    rows, error = FAILED_WRITES[case]
    lake = Lake(tmp_path / "lake")
    assert lake.write(THINGS, "c", [{"id": "old"}], DAY, {"run": "first"}) == 1
    target = lake.path(THINGS, "c", DAY)
    before = target.read_bytes()
    with pytest.raises(error):
        lake.write(THINGS, "c", rows(), DAY, {"run": "second"})
    assert target.read_bytes() == before
    assert lake.query(f"SELECT id FROM {lake.relation(THINGS)}") == [("old",)]
    assert not list(lake.root.glob(f"**/*{TEMPORARY_SUFFIX}"))
    # Nor is there a target where none was.
    with pytest.raises(error):
        lake.write(THINGS, "c", rows(), date(2026, 11, 2))
    assert not lake.path(THINGS, "c", date(2026, 11, 2)).exists()
    assert not list(lake.root.glob(f"**/*{TEMPORARY_SUFFIX}"))
    assert lake.sweep_temporary() == 0
