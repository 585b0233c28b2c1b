"""The bookkeeping merged per day, not per run (pipelines/lake/merge.py): the run history
(`sync.runs`) and the push ledger (`sync.pushed`) keep a bounded number of files; a merge
stopped after any step, or two at once, lose and double no row; and every reader (the lake's
relation, the warehouse's views in memory and in its file, `sync.connection_health`, the
ledger's latest entries) sees each row once in every state a merge passes through."""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from pipelines.lake import Lake
from pipelines.lake import merge as lake_merge
from pipelines.lake.merge import listed, merge_folder, remove, write_merged
from pipelines.lake.run_history import RUNS, RunRecord, merge_history, record_run
from pipelines.pull.landing import today
from pipelines.push.journal import Journal
from pipelines.push.ledger import Ledger
from pipelines.push.ledger_merge import merge_ledger
from pipelines.push.shared_journal import PostgresJournal
from pipelines.streams.pushed import PUSHED
from pipelines.warehouse.relations import refresh_warehouse, warehouse_of
from tests.pipelines.test_object_store import s3_endpoint, s3_root  # noqa: F401 - fixtures
from tests.push.test_journal import entries

#: Three days back: a closed day, copied into a table of the warehouse file.
PAST = 3


def run(number: int, day_back: int) -> RunRecord:
    started = datetime.combine(today() - timedelta(days=day_back), datetime.min.time(), UTC)
    started += timedelta(minutes=number)
    return RunRecord(
        run_id=f"run-{number:03d}",
        relation="comment.trigger_logs",
        started_by="command line",
        started_at=started,
        ended_at=started + timedelta(seconds=30),
        first_day=None,
        last_day=None,
        rows=1,
        requests=1,
        throttled=0,
        retries=0,
        budget_wait_seconds=0.0,
        outcome="succeeded",
        error=None,
        connections=[{"connection": "main", "outcome": "landed", "rows": 1, "error": None}],
    )


def runs_read(lake: Lake) -> list[str]:
    return sorted(r for (r,) in lake.query(f"SELECT run_id FROM {lake.relation(RUNS)}"))


def assert_each_run_once(lake: Lake, expected: list[str], tmp_path: Path) -> None:
    """The lake's relation, the views of a warehouse in memory and of its file (closed days
    as tables) each show every run once; `sync.connection_health` counts each once."""
    assert runs_read(lake) == expected
    warehouse = warehouse_of(lake.place.uri, tmp_path / "warehouse.duckdb", [])
    with warehouse.in_memory() as con:
        assert sorted(r for (r,) in con.sql("SELECT run_id FROM sync.runs").fetchall()) == expected
    refresh_warehouse(lake.place.uri, tmp_path / "warehouse.duckdb", [])
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        got = sorted(r for (r,) in con.sql("SELECT run_id FROM sync.runs").fetchall())
        assert got == expected
        [(counted,)] = con.sql("SELECT sum(runs) FROM sync.connection_health").fetchall()
        assert counted == len(expected)


def day_files(lake: Lake, day_back: int) -> list[str]:
    return lake.files(RUNS, [today() - timedelta(days=day_back)])


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


def test_runs_over_days_keep_a_file_a_past_day_and_read_once(lake, tmp_path):
    """Six runs a day over five days, the history merged after each run: a file a past day,
    today's a file per run, and every reader sees each run once."""
    numbers = iter(range(1000))
    expected = []
    for day_back in range(4, -1, -1):
        for _ in range(6):
            record = run(next(numbers), day_back)
            record_run(lake, record)
            expected.append(record.run_id)
            merge_history(lake, today(), grace=0)
    per_day = Counter(path.split("date=")[1][:10] for path in lake.files(RUNS))
    assert sorted(per_day.values()) == [1, 1, 1, 1, 6]  # four past days, today's six runs
    assert_each_run_once(lake, sorted(expected), tmp_path)


class Stopped(Exception):
    """Stands for the process being killed at that point."""


def stop_merge(monkeypatch, step: str) -> None:
    """Make the next merge stop after `step`; after "its file", a merge whose deletes wait
    (a grace not yet over) stops there by itself."""
    if step == "a row group written":
        real_tables = lake_merge._origin_tables

        def tables_then_stop(*args):
            yield next(real_tables(*args))
            raise Stopped

        monkeypatch.setattr(lake_merge, "_origin_tables", tables_then_stop)
    elif step == "one delete":
        real_remove = lake_merge.remove

        def remove_one_then_stop(lake, folder, names):
            real_remove(lake, folder, names[:1])
            raise Stopped

        monkeypatch.setattr(lake_merge, "remove", remove_one_then_stop)


def originals(lake: Lake, count: int) -> list[str]:
    ids = []
    for number in range(count):
        record_run(lake, run(number, PAST))
        ids.append(run(number, PAST).run_id)
    return ids


@pytest.mark.parametrize("stopped_after", ["a row group written", "its file", "one delete"])
def test_a_run_history_merge_stopped_after_any_step_loses_and_doubles_nothing(
    lake, tmp_path, monkeypatch, stopped_after
):
    expected = originals(lake, 4)
    # An earlier merge's file among the inputs, so both kinds of file are merged.
    merge_history(lake, today(), grace=0)
    expected += originals_after(lake, 4, 3)
    stop_merge(monkeypatch, stopped_after)
    if stopped_after == "its file":
        merge_history(lake, today(), grace=3600)  # the deletes wait: as if killed before them
    else:
        with pytest.raises(Stopped):
            merge_history(lake, today(), grace=0)
    monkeypatch.undo()
    assert_each_run_once(lake, sorted(expected), tmp_path)
    merge_history(lake, today(), grace=0)
    assert len(day_files(lake, PAST)) == 1
    assert_each_run_once(lake, sorted(expected), tmp_path)


def originals_after(lake: Lake, first: int, count: int) -> list[str]:
    for number in range(first, first + count):
        record_run(lake, run(number, PAST))
    return [run(number, PAST).run_id for number in range(first, first + count)]


def test_two_run_history_merges_at_once_double_nothing(lake, tmp_path):
    """Two hosts merge one day step by step, interleaved, the second after a late run's
    file arrived: every state reads each run once, and the next merge leaves one file."""
    expected = originals(lake, 3)
    day = today() - timedelta(days=PAST)
    first = listed(lake, RUNS, day)
    expected += originals_after(lake, 3, 1)
    second = listed(lake, RUNS, day)
    assert first.inputs() != second.inputs()
    write_merged(lake, RUNS, first, first.inputs(), day)
    write_merged(lake, RUNS, second, second.inputs(), day)
    assert_each_run_once(lake, sorted(expected), tmp_path)
    for _ in range(2):  # each deletes what the files it now sees replace
        now = listed(lake, RUNS, day)
        remove(lake, now, now.leftovers(now=float("inf"), grace=0))
        assert runs_read(lake) == sorted(expected)
    assert merge_folder(lake, RUNS, day, grace=0).written is not None  # the two overlap
    assert len(day_files(lake, PAST)) == 1
    assert_each_run_once(lake, sorted(expected), tmp_path)


def test_a_run_written_again_after_its_merge_is_read_as_written_last(lake, tmp_path):
    """A file written again (a retried step) after a merge replaced it: its newer row is
    the one read, and the next merge keeps it."""
    originals(lake, 2)
    merge_history(lake, today(), grace=3600)
    again = run(0, PAST)
    record_run(lake, RunRecord(**{**again.__dict__, "rows": 7}))
    rows = f"SELECT run_id, rows FROM {lake.relation(RUNS)} ORDER BY run_id"
    assert lake.query(rows) == [("run-000", 7), ("run-001", 1)]
    merge_history(lake, today(), grace=0)
    assert lake.query(rows) == [("run-000", 7), ("run-001", 1)]
    assert len(day_files(lake, PAST)) == 1


def ledger_keys(lake: Lake) -> list[str]:
    return sorted(k for (k,) in lake.query(f"SELECT key FROM {lake.relation(PUSHED)}"))


def push(lake: Lake, journal, number: int, count: int = 3) -> list[str]:
    """What a push leaves: its answers journaled, then compacted into the ledger."""
    journal.record(entries(number * count, count))
    journal.compact(lake, PUSHED)
    return [f"ord-{n}" for n in range(number * count, (number + 1) * count)]


def test_forty_pushes_leave_the_ledger_a_few_files_each_row_read_once(lake, tmp_path):
    journal = Journal(tmp_path / "journal")
    keys = []
    for number in range(40):
        keys += push(lake, journal, number)
        merge_ledger(lake, journal, grace=0)
        assert len(lake.files(PUSHED)) == 1
    assert ledger_keys(lake) == sorted(keys)
    with Ledger(lake, tmp_path / "journal") as ledger:
        assert sorted(ledger.latest("order")) == sorted(keys)
    warehouse = warehouse_of(lake.place.uri, tmp_path / "warehouse.duckdb", [])
    with warehouse.in_memory() as con:
        assert con.sql("SELECT count(*) FROM sync.pushed").fetchall() == [(len(keys),)]


def test_a_file_at_the_size_limit_is_left_and_the_rest_merged(lake, tmp_path, monkeypatch):
    journal = Journal(tmp_path / "journal")
    keys = push(lake, journal, 0, count=200)
    monkeypatch.setattr(lake_merge, "FILE_BYTES", lake.listing(PUSHED)[0].size)
    for number in range(1, 4):
        keys += push(lake, journal, number)
    merge_ledger(lake, journal, grace=0)
    assert len(lake.files(PUSHED)) == 2
    assert ledger_keys(lake) == sorted(keys)


@pytest.mark.parametrize("stopped_after", ["a row group written", "its file", "one delete"])
def test_a_ledger_merge_stopped_after_any_step_loses_and_doubles_nothing(
    lake, tmp_path, monkeypatch, stopped_after
):
    journal = Journal(tmp_path / "journal")
    keys = push(lake, journal, 0) + push(lake, journal, 1)
    merge_ledger(lake, journal, grace=0)
    keys += push(lake, journal, 2) + push(lake, journal, 3)
    stop_merge(monkeypatch, stopped_after)
    if stopped_after == "its file":
        merge_ledger(lake, journal, grace=3600)
    else:
        with pytest.raises(Stopped):
            merge_ledger(lake, journal, grace=0)
    monkeypatch.undo()
    assert ledger_keys(lake) == sorted(keys)
    with Ledger(lake, tmp_path / "journal") as ledger:
        assert sorted(ledger.latest("order")) == sorted(keys)
    merge_ledger(lake, journal, grace=0)
    assert len(lake.files(PUSHED)) == 1
    assert ledger_keys(lake) == sorted(keys)


def test_a_shared_journal_file_a_compaction_may_write_again_waits(lake, shared_store, monkeypatch):
    """A Postgres compaction stopped after its file, before its delete: its file is left out
    of merges until the next compaction has written it again with the rows since."""
    journal = PostgresJournal(shared_store, lake.place.uri)
    journal.record(entries(0, 3))
    journal.compact(lake, PUSHED)
    journal.record(entries(3, 3))
    real = journal._db.transaction

    @contextmanager
    def killed_before_commit():
        with real() as db:
            yield db
            raise Stopped

    monkeypatch.setattr(journal._db, "transaction", killed_before_commit)
    with pytest.raises(Stopped):
        journal.compact(lake, PUSHED)
    monkeypatch.undo()
    journal.record(entries(6, 3))
    assert merge_ledger(lake, journal, grace=0).written is None  # the stopped one's waits
    assert len(lake.files(PUSHED)) == 2
    journal.compact(lake, PUSHED)  # its file written again, with the rows since
    merge_ledger(lake, journal, grace=0)
    assert len(lake.files(PUSHED)) == 1
    assert ledger_keys(lake) == sorted(f"ord-{n}" for n in range(9))


def test_merges_in_a_bucket_read_each_row_once_and_leave_a_file(s3_root, tmp_path):  # noqa: F811
    """The lake on an object store: both merges, stopped before their deletes and then run
    whole, read each row once and leave one file."""
    lake = Lake(s3_root)
    expected = originals(lake, 3)
    merge_history(lake, today(), grace=3600)
    assert len(day_files(lake, PAST)) == 4
    with warehouse_of(s3_root, tmp_path / "warehouse.duckdb", []).in_memory() as con:
        assert sorted(r for (r,) in con.sql("SELECT run_id FROM sync.runs").fetchall()) == expected
    merge_history(lake, today(), grace=0)
    assert len(day_files(lake, PAST)) == 1
    assert runs_read(lake) == expected

    journal = Journal(tmp_path / "journal")
    keys = push(lake, journal, 0) + push(lake, journal, 1)
    merge_ledger(lake, journal, grace=3600)
    assert len(lake.files(PUSHED)) == 3
    assert ledger_keys(lake) == sorted(keys)
    merge_ledger(lake, journal, grace=0)
    assert len(lake.files(PUSHED)) == 1
    assert ledger_keys(lake) == sorted(keys)
