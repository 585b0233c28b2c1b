"""`Lake.writer`: a file appears under its name only if its block and its last flush succeed,
and a failed write leaves neither a temporary file nor a changed target."""

from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import lake as lake_module
from pipelines.lake import TEMPORARY_SUFFIX, Lake
from pipelines.stream import TIMESTAMP, Stream

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
    target = Path(lake.path(THINGS, "c", DAY))
    before = target.read_bytes()
    with pytest.raises(error):
        lake.write(THINGS, "c", rows(), DAY, {"run": "second"})
    assert target.read_bytes() == before
    assert lake.query(f"SELECT id FROM {lake.relation(THINGS)}") == [("old",)]
    assert not list(Path(lake.root).glob(f"**/*{TEMPORARY_SUFFIX}"))
    # Nor is there a target where none was.
    with pytest.raises(error):
        lake.write(THINGS, "c", rows(), date(2026, 11, 2))
    assert not lake.exists(lake.path(THINGS, "c", date(2026, 11, 2)))
    assert not list(Path(lake.root).glob(f"**/*{TEMPORARY_SUFFIX}"))
    assert lake.sweep_temporary() == 0


# -- files of the older seconds type, beside today's microseconds -----------------------------

EVENTS = Stream(
    "test",
    "events",
    pa.schema([("id", pa.string()), ("moment", TIMESTAMP)]),
    daily=True,
)
AT = datetime(2026, 10, 1, 10, 0, 5, tzinfo=UTC)


def test_a_lake_with_files_of_the_older_seconds_type_reads_and_rewrites_as_one(tmp_path):
    """Lakes landed before every date-time became UTC microseconds hold comment and data hub
    files in seconds; they keep reading as one relation, and a day read back from such a file
    (as the trigger-log head merge does) is rewritten in today's type."""
    lake = Lake(tmp_path)
    older = Stream(
        "test",
        "events",
        pa.schema([("id", pa.string()), ("moment", pa.timestamp("s", tz="UTC"))]),
        daily=True,
    )
    lake.write(older, "a", [{"id": "old", "moment": AT}], day=DAY)
    lake.write(EVENTS, "a", [{"id": "new", "moment": AT}], day=date(2026, 11, 2))

    rows = lake.query(f"SELECT id, moment FROM {lake.relation(EVENTS)} ORDER BY id")
    assert rows == [("new", AT), ("old", AT)]

    old_file = lake.path(EVENTS, "a", DAY)
    with lake.writer(EVENTS, "a", DAY) as out:
        out.extend([pq.read_table(old_file), pa.table({"id": ["newer"], "moment": [AT]})])
    rewritten = pq.read_table(old_file)
    assert rewritten.schema.field("moment").type == pa.timestamp("us", tz="UTC")
    assert rewritten.to_pylist() == [{"id": "old", "moment": AT}, {"id": "newer", "moment": AT}]


def test_a_sweep_keeps_the_file_another_run_is_writing_and_removes_a_dead_ones(tmp_path):
    """Regression: a sync started beside another swept the other's file being written, whose
    rename then failed (found by tests/pipelines/test_sync.py's two syncs at once)."""
    writing, sweeping = Lake(tmp_path / "lake"), Lake(tmp_path / "lake")
    with writing.writer(EVENTS, "a", date(2026, 1, 2)) as out:
        out.extend([{"id": "1", "moment": AT, "connection": "a"}])
        [live] = list((tmp_path / "lake").rglob(f"*{TEMPORARY_SUFFIX}"))
        left = live.with_name(f".default.parquet.dead{TEMPORARY_SUFFIX}")
        left.write_bytes(b"a killed run's")  # nobody holds it
        assert sweeping.sweep_temporary() == 1
        assert live.exists() and not left.exists()
    assert writing.days(EVENTS, "a") == [date(2026, 1, 2)]
    assert not list((tmp_path / "lake").rglob(f"*{TEMPORARY_SUFFIX}"))
