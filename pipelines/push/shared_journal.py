"""The push's journal in the deployment's Postgres (`SYNC_STORE`), where runs move between
hosts: an acknowledgement written on one pod is read by the next run wherever it starts.

The same lines as the file journal (`pipelines/push/journal.py`), one row each, committed
before the worker's next request: a commit is durable (the server syncs its log), so a push
killed at any moment, or a pod that goes away with its disk, has lost no acknowledgement. A
push's rows are written only while its lease (`pipelines/push/lease.py`) is its own by the
server's clock, checked in the same statement: one paused past its lease writes nothing more.
Rows are scoped by the lake, so lakes sharing one database do not mix.

`compact` moves a lake's rows into `sync/pushed` as one Parquet file named by the first id
it holds, then deletes exactly the rows it read: a compaction stopped in between writes the
same file again, with any rows that came since, never a second copy of the first.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping

import pyarrow as pa

from pipelines.lake import Lake
from pipelines.push.journal import BLOCK_BYTES, STOPPED, journal_lines, journal_tables
from pipelines.push.lease import Lease, PostgresLeases
from pipelines.state.shared_store import STORE_VARIABLE, Postgres
from pipelines.stream import Stream

TABLE = "warehouse_sync_push_journal"
#: The ledger file a compaction writes is named by the first id it holds.
FILE_PREFIX = "journal-pg-"
FILE_NAME = re.compile(rf"{FILE_PREFIX}(\d+)\.parquet")
#: Rows read from the server at a time while compacting.
FETCH_ROWS = 5_000


#: The server's failure is not this host's disk: where to look, and what the next push does.
_ADVICE = (
    "Check that the deployment's Postgres is running and that this machine reaches it at "
    f"SYNC_STORE. {STOPPED}"
)


class PostgresJournal:
    """A lake's journal in Postgres; `record` from any thread (the connection is one per
    process, its statements serialised)."""

    _SETUP = (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, lake text NOT NULL, "
        "line text NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_by_lake ON {TABLE} (lake, id)",
    )
    _INSERT = f"INSERT INTO {TABLE} (lake, line) SELECT %(lake)s, unnest(%(lines)s::text[])"
    #: Written only while the push's lease is its own, by the server's clock (`Lease.fence`).
    _FENCED = f"{_INSERT} WHERE {PostgresLeases.HELD} RETURNING id"

    def __init__(self, url: str, lake_root: str) -> None:
        self.location = url
        self.lake_root = lake_root
        self._db = Postgres(url, "the push journal", STORE_VARIABLE, self._SETUP, _ADVICE)

    def record(
        self, entries: Iterable[Mapping], fsync: bool = False, lease: Lease | None = None
    ) -> int:
        """Insert entries (ledger rows) in one statement; returns how many once committed
        (always on the disk: `fsync` asks nothing more). With a `lease` in this database,
        only while it is the push's own, else nothing is written and `LeaseLost` raised."""
        lines = journal_lines(entries)
        if not lines:
            return 0
        fence = lease.fence if lease is not None else None
        values = {"lake": self.lake_root, "lines": lines}
        if fence is None:
            self._db.run(self._INSERT, values)
        elif not self._db.run(self._FENCED, values | fence):
            raise lease.lapsed()
        return len(lines)

    def close(self) -> None:
        """Nothing held between answers: every row is committed as it is written."""

    def moving(self, names: Collection[str]) -> set[str]:
        """Of the ledger files named, those a compaction may write again with more rows: one
        named by an id the journal still holds was written by a compaction stopped before its
        delete (`pipelines/push/ledger_merge.py` leaves them to a later merge)."""
        [(first,)] = self._db.run(
            f"SELECT min(id) FROM {TABLE} WHERE lake = %(lake)s", {"lake": self.lake_root}
        )
        if first is None:
            return set()
        return {
            name
            for name in names
            if (found := FILE_NAME.fullmatch(name)) is not None and int(found[1]) >= first
        }

    def compact(self, lake: Lake, stream: Stream) -> int:
        """Move the lake's rows into `stream`; returns the rows moved."""
        ids: list[int] = []
        with self._db.transaction() as db:
            # One compaction of a lake at a time (a dry run's beside a push's): two would
            # write one file name with different rows, and each delete what it read.
            db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (self.lake_root,))
            cursor = db.cursor(name="journal")  # server side: memory stays flat
            cursor.itersize = FETCH_ROWS
            cursor.execute(
                f"SELECT id, line FROM {TABLE} WHERE lake = %s ORDER BY id", (self.lake_root,)
            )
            rows = iter(cursor)
            first = next(rows, None)
            if first is None:
                return 0
            ids.append(first[0])
            with lake.writer(stream, f"{FILE_PREFIX}{first[0]}") as out:
                for block in _blocks(_lines(first, rows, ids)):
                    for table in journal_tables(pa.BufferReader(block), stream):
                        out.write_table(table)
            cursor.close()
            db.execute(f"DELETE FROM {TABLE} WHERE id = ANY(%s)", (ids,))
        return out.rows


def _lines(first: tuple[int, str], rows: Iterator[tuple[int, str]], ids: list[int]):
    """The lines in order, each id kept in `ids` as it goes by."""
    yield first[1]
    for row_id, line in rows:
        ids.append(row_id)
        yield line


def _blocks(lines: Iterable[str]) -> Iterator[bytes]:
    """Lines joined into blocks of about `BLOCK_BYTES`, each ending with a newline."""
    block: list[str] = []
    size = 0
    for line in lines:
        block.append(line)
        size += len(line) + 1
        if size >= BLOCK_BYTES:
            yield ("\n".join(block) + "\n").encode()
            block, size = [], 0
    if block:
        yield ("\n".join(block) + "\n").encode()
