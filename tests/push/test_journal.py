"""The push's journal (pipelines/push/journal.py, and pipelines/push/shared_journal.py in
the deployment's Postgres): every acknowledgement reaches the ledger's files exactly once,
whatever stops a compaction half-way and however many run at once."""

import fcntl
import os
import socket
import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipelines.lake import Lake
from pipelines.push.journal import Journal, journal_path
from pipelines.push.ledger import PUSHED, Ledger, open_journal
from pipelines.push.shared_journal import PostgresJournal
from pipelines.state.shared_store import StoreUnavailable


def entries(first: int, count: int) -> list[dict]:
    return [
        {
            "record_type": "order",
            "key": f"ord-{n}",
            "timestamp": datetime(2026, 10, 1, tzinfo=UTC),
            "content_hash": f"h{n}",
            "content": "{}",
            "state": "accepted",
            "event_id": f"ev-{n}",
            "connection": "default",
        }
        for n in range(first, first + count)
    ]


def ledger_keys(lake: Lake) -> list[str]:
    relation = lake.relation(PUSHED)
    return [] if relation is None else [k for (k,) in lake.query(f"SELECT key FROM {relation}")]


def compact_beside_a_writer(lake: Lake, writer, compactors, after_batch=None) -> None:
    """50 batches of 10 recorded by `writer` while each of `compactors` compacts over and
    over, then once more: every row reaches the ledger once."""
    done = threading.Event()

    def record() -> None:
        for batch in range(50):
            writer.record(entries(batch * 10, 10))
            if after_batch is not None:
                after_batch(batch)
        done.set()

    def compact(journal) -> None:
        while not done.is_set():
            journal.compact(lake, PUSHED)
        journal.compact(lake, PUSHED)

    threads = [threading.Thread(target=record)]
    threads += [threading.Thread(target=compact, args=(j,)) for j in compactors]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    keys = ledger_keys(lake)
    assert len(keys) == len(set(keys)) == 500


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


def test_what_is_journaled_is_read_back_by_the_ledger_once(lake):
    with Ledger(lake) as ledger:
        ledger.record(
            "order", [{k: v for k, v in e.items() if k != "record_type"} for e in entries(0, 3)]
        )
        latest = ledger.latest("order")
        assert sorted(latest) == ["ord-0", "ord-1", "ord-2"]
        assert latest["ord-1"].timestamp == datetime(2026, 10, 1, tzinfo=UTC)
        assert ledger.compact() == 0  # already in the lake
    assert sorted(ledger_keys(lake)) == ["ord-0", "ord-1", "ord-2"]
    assert journal_path(lake.root).exists()


def test_a_compaction_stopped_after_its_file_is_written_moves_nothing_twice(lake, monkeypatch):
    """The file is in the lake but the journal's rows were not deleted (a kill between the
    two): the file's name says which rows it holds, so the next compaction only deletes."""
    journal = Journal(journal_path(lake.root))
    journal.record(entries(0, 5))
    unlink = Path.unlink

    def die_before_unlinking(self, *args, **kwargs):
        raise KeyboardInterrupt("killed after the rename")

    monkeypatch.setattr(Path, "unlink", die_before_unlinking)
    with pytest.raises(KeyboardInterrupt):
        journal.compact(lake, PUSHED)
    monkeypatch.setattr(Path, "unlink", unlink)
    assert len(ledger_keys(lake)) == 5
    journal.record(entries(5, 2))
    assert journal.compact(lake, PUSHED) == 5 + 2  # the first file written again, in place
    assert journal.compact(lake, PUSHED) == 0
    assert sorted(ledger_keys(lake)) == sorted(f"ord-{n}" for n in range(7))
    journal.close()


def test_compactions_in_several_processes_at_once_write_each_row_once(lake):
    """Journals on one folder stand for processes (a file lock is per open file, so they
    exclude each other as processes do): a push that ends every few batches and a new one
    that starts, while two compactions run."""
    path = journal_path(lake.root)
    writer, compactors = Journal(path), [Journal(path), Journal(path)]

    def push_ends_now_and_then(batch: int) -> None:
        if batch % 5 == 4:
            writer.close()  # the push ends; the next record opens a file of its own

    compact_beside_a_writer(lake, writer, compactors, push_ends_now_and_then)
    assert list(path.iterdir()) == []
    for journal in (writer, *compactors):
        journal.close()


def test_a_file_a_killed_push_left_unnamed_is_removed_and_a_held_one_kept(lake):
    """A push killed between creating its file and naming it leaves an empty `.tmp`; one
    that a live push still holds, or has just created, is not touched. Regression: a
    compaction removed a file a push had created and not yet locked, and the push failed."""
    folder = journal_path(lake.root)
    folder.mkdir(parents=True)
    left, fresh = folder / ".journal-left.jsonl.tmp", folder / ".journal-new.jsonl.tmp"
    left.touch()
    fresh.touch()  # being created right now: not locked yet, about to be named
    an_hour_ago = time.time() - 3601
    os.utime(left, (an_hour_ago, an_hour_ago))
    held = folder / ".journal-held.jsonl.tmp"
    fd = os.open(held, os.O_WRONLY | os.O_CREAT)
    os.utime(held, (an_hour_ago, an_hour_ago))
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        Journal(folder).compact(lake, PUSHED)
        assert not left.exists() and fresh.exists() and held.exists()
    finally:
        os.close(fd)


def test_a_line_cut_short_is_left_out_and_long_lines_kept(lake):
    """A `write` cut short by a full disk raised in its worker, so its line was never taken
    as written; the lines before it are, however long (longer than one read of the end)."""
    folder = journal_path(lake.root)
    journal = Journal(folder)
    long = entries(0, 1)[0] | {"content": "x" * 200_000}
    assert journal.record([long, *entries(1, 1)]) == 2
    journal.close()
    [path] = folder.glob("journal-*.jsonl")
    with path.open("ab") as file:
        file.write(b'{"record_type": "order", "key": "ord-cut", "cont')
    assert journal.compact(lake, PUSHED) == 2
    relation = lake.relation(PUSHED)
    assert sorted(lake.query(f"SELECT key, length(content) FROM {relation}")) == [
        ("ord-0", 200_000),
        ("ord-1", 2),
    ]


def test_the_shared_journal_is_read_back_once_and_keeps_lakes_apart(lake, shared_store, tmp_path):
    """`SYNC_STORE` set: the ledger's journal is the deployment's Postgres, scoped by lake."""
    env = {"SYNC_STORE": shared_store, "LAKE_ROOT": lake.place.uri}
    journal = open_journal(lake.place.uri, env)
    assert isinstance(journal, PostgresJournal)
    other = Lake(tmp_path / "other")
    open_journal(other.place.uri, env).record(entries(100, 2))
    journal.record(entries(0, 3))
    assert journal.compact(lake, PUSHED) == 3
    assert journal.compact(lake, PUSHED) == 0
    assert sorted(ledger_keys(lake)) == ["ord-0", "ord-1", "ord-2"]
    assert open_journal(other.place.uri, env).compact(other, PUSHED) == 2
    assert not isinstance(
        open_journal(lake.place.uri, env | {"PUSH_JOURNAL": "j"}), PostgresJournal
    )


def test_shared_compactions_at_once_beside_a_writer_write_each_row_once(lake, shared_store):
    """Two compactions (a dry run's beside a push's) while a push records: every row reaches
    the ledger once and the journal is left empty."""
    writer = PostgresJournal(shared_store, lake.place.uri)
    compactors = [PostgresJournal(shared_store, lake.place.uri) for _ in range(2)]
    compact_beside_a_writer(lake, writer, compactors)
    assert writer.compact(lake, PUSHED) == 0


def test_a_shared_compaction_stopped_after_its_file_is_written_moves_nothing_twice(
    lake, shared_store, monkeypatch
):
    journal = PostgresJournal(shared_store, lake.place.uri)
    journal.record(entries(0, 5))
    real = journal._db.transaction

    @contextmanager
    def killed_before_commit():
        with real() as db:
            yield db
            raise KeyboardInterrupt("killed before the delete committed")

    monkeypatch.setattr(journal._db, "transaction", killed_before_commit)
    with pytest.raises(KeyboardInterrupt):
        journal.compact(lake, PUSHED)
    monkeypatch.undo()
    assert len(ledger_keys(lake)) == 5
    journal.record(entries(5, 2))
    assert journal.compact(lake, PUSHED) == 7  # the first file written again, in place
    assert sorted(ledger_keys(lake)) == sorted(f"ord-{n}" for n in range(7))


def test_a_shared_journal_whose_server_is_down_names_sync_store_and_no_disk(tmp_path):
    """Postgres gone (nothing listens at SYNC_STORE's address): one message naming the
    setting and the server, and not the local folder's advice about free space."""
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreUnavailable) as failed:
        journal = PostgresJournal(f"postgresql://user@127.0.0.1:{port}/db", str(tmp_path))
        journal.record([{"record_type": "order", "key": "ord-1", "state": "accepted"}])
    message = str(failed.value)
    assert "SYNC_STORE" in message and "Postgres is running" in message
    assert "Free space" not in message and "PUSH_JOURNAL" not in message
