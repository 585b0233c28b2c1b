"""What changed since the last push: DuckDB tells which keys of an outbound view may need a
request, and only their rows reach Python.

A plan's decision for a key (`plan.py`) depends on nothing but the key's rows in the view, in
their order, the ledger's latest entry for the key, and what rows are checked against (the
planning rules, the custom field definitions). After a push, each key whose decision sent
nothing and left nothing in doubt (unchanged, stale, waiting, rejected; refused by the
service, until its retry) is kept in `<lake>/sync/push_state/<record type>.parquet`
(`PUSH_STATE`) with a fingerprint of its rows (DuckDB's `hash` of each row with its place
among the key's rows in view order), a mark of its ledger entry (the hash of that entry),
the figures it counted and, if refused, when it is tried again. The next push hands Python
only the keys that are new, whose fingerprint or mark differs, or whose retry is due; the
others' figures are added from the file and their rows of `sync.rejected` kept.

Each kept row stands for a decision its inputs made, whoever wrote it: a file left by an
older push, a damaged one or none costs work, never a wrong skip. A row whose key DuckDB
writes otherwise than Python (`KeyColumns.sql`) makes its record type planned whole
(`Changes.differs`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb
import pyarrow as pa

from pipelines.lake import Lake, sql_literal
from pipelines.push.imports import MAX_ROWS
from pipelines.push.ledger import Entry, as_json
from pipelines.push.plan import OUTBOUND, REFUSED_BEFORE, Plan, Sending, row_key
from pipelines.streams.pushed import PUSH_STATE, PUSHED, REJECTED

#: Changed whenever a plan would decide otherwise on the same rows and ledger, so that every
#: kept decision is made again.
RULES_VERSION = "1"
#: A row the service refused is sent again this long after, the wait doubling at each
#: refusal of the same row up to `RETRY_MOST` (docs/push.md, "Refused rows").
RETRY_FIRST = timedelta(hours=1)
RETRY_MOST = timedelta(days=1)
#: Keys planned (and sent) at a time: Python holds one batch, their rows and then their plan,
#: and nothing of the view's other keys (bench/README.md, "The push's peak memory bounded").
KEYS_AT_A_TIME = 2_000
#: A bulk import's batch is one import of the hub's: smaller ones would spend more of its
#: imports a minute for the same rows, and an import row is small.
IMPORT_KEYS_AT_A_TIME = MAX_ROWS
#: Rows fetched from DuckDB at a time: each a tuple of the view's columns, beside the batch.
ROWS_AT_A_TIME = 2_000
#: Rows of the view DuckDB sorts by key at a time for the plans (each read reads the view).
ROWS_PER_READ = 50_000
#: Decisions that sent nothing and leave nothing to settle: kept for the next push.
KEPT = ("unchanged", "stale", "waiting", "rejected")


def context_of(record_type: str, custom_fields: Mapping[str, Sequence[Mapping]]) -> str:
    """What a kept decision was made under: the rules, DuckDB's hash (its version), the
    record type and the custom field definitions rows are checked against."""
    definitions = sorted(as_json(d) for fields in custom_fields.values() for d in fields)
    seen = as_json([RULES_VERSION, duckdb.__version__, record_type, definitions])
    return hashlib.sha256(seen.encode()).hexdigest()[:32]


def within_memory(
    con: duckdb.DuckDBPyConnection, query: str, parameters: dict | None = None
) -> duckdb.DuckDBPyConnection:
    """`con` executing a query that reads an outbound view or the ledger, within the push's memory
    (`PUSH_SETTINGS`, pipelines/warehouse/__init__.py) where DuckDB can keep to it, else
    without a limit for the rest of the push: some of its operators do not spill (a sort or
    a window over wide rows), and a view they could not run before must not fail now."""
    try:
        return con.execute(query, parameters)
    except duckdb.OutOfMemoryException:
        con.execute("RESET memory_limit")
        return con.execute(query, parameters)


@dataclass
class Batch:
    """The rows of some keys, each key's rows whole and in view order, and the ledger's
    latest entry of each key that has one."""

    rows: list[dict]
    accepted: dict[str, Entry]


def mark_ledger(con: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    """Every record type's ledger marks, in one read of the ledger (its journal compacted), for
    the `Changes` of one push: a record type's sends change only its own entries, read again
    where they are kept (`Changes.keep`)."""
    ledger = lake.relation(PUSHED) or f"(SELECT 'none' AS record_type, {_NO_LEDGER})"
    con.execute("CREATE SCHEMA IF NOT EXISTS push_work")
    within_memory(
        con,
        "CREATE OR REPLACE TABLE push_work.marks AS "
        f"SELECT record_type, key, {_MARK} AS mark FROM {ledger} GROUP BY record_type, key",
    )


class Changes:
    """One record type's outbound view against what the last push kept, in the push's
    DuckDB (`con`: `Warehouse.in_memory()`, a database of this push's own, where its work
    tables live in schema `push_work`), with the ledger's marks `mark_ledger` read."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        lake: Lake,
        record_type: str,
        source: str,
        context: str,
        now: datetime,
        retry_refused: bool = False,
    ) -> None:
        """`source`: the relation the record type's rows are read from (its outbound view,
        `pipelines/push/run.py`'s `outbound_source`)."""
        self.con = con
        self.lake = lake
        #: A row DuckDB keys otherwise than Python was met (`batches`).
        self.differs = False
        self.record_type = record_type
        self.context = context
        self.now = now
        outbound = OUTBOUND[record_type]
        self.source = source
        # A body, and so its hash, must not change with the host's zone (`outbound_rows`).
        con.execute("SET TimeZone = 'UTC'")
        described = con.execute(f"SELECT * FROM {self.source} LIMIT 0").description
        self.columns = [d[0] for d in described]
        self.key_sql = outbound.key.sql({d[0]: str(d[1]) for d in described})
        self._rejected = self._file(lake.path(REJECTED, record_type))
        con.execute(
            "CREATE OR REPLACE TABLE push_work.decided "
            "(key VARCHAR, outcome VARCHAR, rejected BIGINT)"
        )
        self._kept = self._file(lake.path(PUSH_STATE, record_type))
        try:
            self._compare(retry_refused)
        except (duckdb.IOException, duckdb.InvalidInputException):
            # The kept file cannot be read: every key is planned, and the file written anew.
            self._kept = None
            self._compare(retry_refused)

    def _ledger(self) -> str:
        """The record type's rows of the ledger's files as they are now (a push's first
        answers may make its first file)."""
        ledger = self.lake.relation(PUSHED)
        if ledger is None:
            return f"(SELECT {_NO_LEDGER} WHERE false)"
        return f"(SELECT * FROM {ledger} WHERE record_type = {sql_literal(self.record_type)})"

    def _file(self, path: str) -> str | None:
        if not self.lake.exists(path):
            return None
        return f"read_parquet({sql_literal(self.lake.uri(path))})"

    def _compare(self, retry_refused: bool) -> None:
        state = (
            f"(SELECT * FROM {self._kept} WHERE context = {sql_literal(self.context)})"
            if self._kept
            else f"(SELECT {_NOTHING_KEPT} WHERE false)"
        )
        within_memory(
            self.con,
            f"""
            CREATE OR REPLACE TABLE push_work.keys AS
            WITH view_rows AS (
                SELECT {self.key_sql} AS __key, hash(__outbound_row) AS __row,
                    row_number() OVER () AS __n
                FROM {self.source} AS __outbound_row
            ), view_keys AS (
                -- Each row's hash with its place among its key's rows: a window and a sum
                -- spill under the push's memory limit, where an ordered list does not.
                SELECT __key AS key, hash(sum(hash(__row, __place)), count(*)) AS fingerprint,
                    count(*) AS rows
                FROM (
                    SELECT __key, __row,
                        row_number() OVER (PARTITION BY __key ORDER BY __n) AS __place
                    FROM view_rows
                )
                GROUP BY __key
            ), marks AS (
                SELECT key, mark FROM push_work.marks
                WHERE record_type = {sql_literal(self.record_type)}
            )
            SELECT v.key, v.fingerprint, v.rows, m.mark, s.fingerprint AS kept_fingerprint,
                s.outcome, s.rejected, s.refusals, s.retry_at,
                s.key IS NULL OR s.fingerprint <> v.fingerprint
                    OR s.mark IS DISTINCT FROM m.mark
                    OR coalesce(s.retry_at <= $now, false)
                    OR ($retry_refused AND s.outcome = 'refused') AS handed
            FROM view_keys v LEFT JOIN marks m USING (key) LEFT JOIN {state} s USING (key)
            """,
            {"now": self.now, "retry_refused": retry_refused},
        )
        # A kept key whose rows of `sync.rejected` are not there (that file lost, or older
        # than the kept one) is planned again, so that they are.
        listed = f" AND key NOT IN (SELECT key FROM {self._rejected})" if self._rejected else ""
        self.con.execute(
            "UPDATE push_work.keys SET handed = true WHERE NOT handed "
            f"AND (rejected > 0 OR outcome IN ('waiting', 'refused')){listed}"
        )

    def _gone(self) -> bool:
        """Whether the kept file holds keys no longer in the view."""
        if self._kept is None:
            return False
        [(kept, still)] = self.con.execute(
            f"SELECT (SELECT count(*) FROM {self._kept}), "
            "(SELECT count(*) FROM push_work.keys WHERE kept_fingerprint IS NOT NULL)"
        ).fetchall()
        return kept != still

    def handed(self) -> int:
        """How many keys Python plans."""
        [(count,)] = self.con.execute("SELECT count(*) FROM push_work.keys WHERE handed").fetchall()
        return count

    def carried(self) -> Counter:
        """The figures of the keys not handed, as the last push decided them."""
        figures: Counter = Counter()
        kept = self.con.execute(
            "SELECT outcome, count(*), sum(rejected) FROM push_work.keys WHERE NOT handed "
            "GROUP BY outcome"
        ).fetchall()
        for outcome, keys, rejected in kept:
            if outcome == "refused":
                figures[REFUSED_BEFORE] += keys
            elif outcome != "rejected":
                figures[outcome] += keys
            figures["rejected"] += rejected
        return figures

    def carried_rejections(self) -> list[dict]:
        """The rows of `sync.rejected` of the keys not handed, as the last push left them."""
        if self._rejected is None:
            return []
        cursor = self.con.execute(
            f"SELECT key, field, reason, source, row FROM {self._rejected} "
            "WHERE key IN (SELECT key FROM push_work.keys WHERE NOT handed)"
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def batches(self) -> Iterator[Batch]:
        """The handed keys' rows, `KEYS_AT_A_TIME` keys a batch (a bulk import's
        `IMPORT_KEYS_AT_A_TIME`), read on a cursor of their own (`decided` writes meanwhile).
        They stop at the first row Python keys otherwise, saying so in `differs`: the record
        type is then planned whole."""
        if not self.handed():
            return
        # The handed keys, in key order, cut into reads of about `ROWS_PER_READ` rows: DuckDB
        # sorts one read's rows at a time, not every handed row at once.
        self.con.execute(
            f"""
            CREATE OR REPLACE TABLE push_work.reads AS
            SELECT key, (sum(rows) OVER (ORDER BY key) - 1) // {ROWS_PER_READ} AS read
            FROM push_work.keys WHERE handed
            """
        )
        within_memory(
            self.con,
            f"""
            CREATE OR REPLACE TABLE push_work.entries AS
            SELECT key, arg_max(struct_pack({_ENTRY}), pushed_at) AS entry
            FROM {self._ledger()} WHERE key IN (SELECT key FROM push_work.reads) GROUP BY key
            """,
        )
        [(reads,)] = self.con.execute("SELECT max(read) + 1 FROM push_work.reads").fetchall()
        cursor = self.con.cursor()
        cursor.execute("SET TimeZone = 'UTC'")
        try:
            grouped = self._grouped(self._read(cursor, read) for read in range(reads))
            yield from grouped
        finally:
            cursor.close()

    def _read(self, cursor: duckdb.DuckDBPyConnection, read: int) -> Iterator[tuple]:
        """The rows of one read's keys, each key's in view order, with its ledger entry."""
        within_memory(
            cursor,
            f"""
            SELECT r.*, e.entry AS __entry
            FROM (
                SELECT {self.key_sql} AS __key, row_number() OVER () AS __n,
                    __outbound_row.*
                FROM {self.source} AS __outbound_row
            ) AS r
            JOIN (SELECT key FROM push_work.reads WHERE read = $read) h ON h.key = r.__key
            LEFT JOIN push_work.entries e ON e.key = r.__key
            ORDER BY r.__key, r.__n
            """,
            {"read": read},
        )
        while fetched := cursor.fetchmany(ROWS_AT_A_TIME):
            yield from fetched

    def _grouped(self, reads: Iterator[Iterator[tuple]]) -> Iterator[Batch]:
        at_a_time = KEYS_AT_A_TIME
        if OUTBOUND[self.record_type].sending is Sending.MEMBER_IMPORT:
            at_a_time = IMPORT_KEYS_AT_A_TIME
        batch, keys, last = Batch([], {}), 0, None
        for values in (row for read in reads for row in read):
            key, entry = values[0], values[-1]
            row = dict(zip(self.columns, values[2:-1], strict=True))
            if row_key(self.record_type, row) != key:
                self.differs = True
                return
            if key != last:
                if keys == at_a_time:
                    yield batch
                    batch, keys = Batch([], {}), 0
                keys, last = keys + 1, key
                if entry is not None:
                    batch.accepted[key] = Entry(**entry)
            batch.rows.append(row)
        if batch.rows:
            yield batch

    def decided(self, plan: Plan, refused: set[str]) -> None:
        """Note the plan's keys the next push may skip: those decided without a request, and
        those the service refused (`refused`: their keys)."""
        kept: dict[str, list] = {"key": [], "outcome": [], "rejected": []}
        for key in {*plan.decided, *plan.rejected_rows}:
            outcome = "refused" if key in refused else plan.decided.get(key, "rejected")
            if outcome in KEPT or outcome == "refused":
                kept["key"].append(key)
                kept["outcome"].append(outcome)
                kept["rejected"].append(plan.rejected_rows[key])
        self.con.register("push_batch", pa.table(kept))
        try:
            self.con.execute("INSERT INTO push_work.decided SELECT * FROM push_batch")
        finally:
            self.con.unregister("push_batch")

    def keep(self) -> None:
        """Write what the next push skips: the keys not handed, as they were, and those
        `decided` noted. A refused key's ledger entry is read again: its refusal wrote one.
        Nothing is written where nothing changed: no key handed, none gone from the view."""
        if not self.handed() and not self._gone():
            return
        context = sql_literal(self.context)
        refusals = (
            "CASE WHEN d.outcome <> 'refused' THEN 0 "
            "WHEN k.outcome = 'refused' AND k.kept_fingerprint = k.fingerprint "
            "THEN k.refusals + 1 ELSE 1 END"
        )
        first, most = RETRY_FIRST.total_seconds(), RETRY_MOST.total_seconds()
        [(refused,)] = self.con.execute(
            "SELECT count(*) FROM push_work.decided WHERE outcome = 'refused'"
        ).fetchall()
        ledger = self._ledger() if refused else f"(SELECT {_NO_LEDGER} WHERE false)"
        query = f"""
            WITH refused_marks AS (
                SELECT key, {_MARK} AS mark
                FROM {ledger}
                WHERE key IN (SELECT key FROM push_work.decided WHERE outcome = 'refused')
                GROUP BY key
            ), decided AS (
                SELECT d.key, k.fingerprint,
                    CASE WHEN d.outcome = 'refused' THEN r.mark ELSE k.mark END AS mark,
                    d.outcome, d.rejected, {refusals} AS refusals
                FROM push_work.decided d JOIN push_work.keys k USING (key)
                LEFT JOIN refused_marks r USING (key)
            )
            SELECT key, fingerprint, mark, outcome, rejected, refusals, retry_at,
                {context} AS context
            FROM push_work.keys WHERE NOT handed
            UNION ALL
            SELECT key, fingerprint, mark, outcome, rejected, refusals,
                CASE WHEN outcome = 'refused' THEN $now::TIMESTAMPTZ + to_seconds(
                    CAST(least({first} * pow(2, refusals - 1), {most}) AS BIGINT)
                ) END AS retry_at,
                {context} AS context
            FROM decided
        """
        with self.lake.placed(self.lake.path(PUSH_STATE, self.record_type)) as temporary:
            within_memory(
                self.con,
                f"COPY ({query}) TO {sql_literal(temporary)} (FORMAT parquet, COMPRESSION zstd)",
                {"now": self.now},
            )


_ENTRY = "timestamp, content_hash, content, state, task_id, connection"
_MARKED = "timestamp, content_hash, state, task_id, connection, pushed_at"
#: A key's mark: the hash of its newest ledger entry. The aggregate keeps a number per key,
#: not the entry, so it stays within the push's memory whatever the ledger holds.
_MARK = f"arg_max(hash(struct_pack({_MARKED})), pushed_at)"
#: The columns the queries read of a ledger that has no file yet.
_NO_LEDGER = (
    "NULL::VARCHAR AS key, NULL::TIMESTAMPTZ AS timestamp, NULL::VARCHAR AS content_hash, "
    "NULL::VARCHAR AS content, NULL::VARCHAR AS state, NULL::BIGINT AS task_id, "
    "NULL::VARCHAR AS connection, NULL::TIMESTAMPTZ AS pushed_at"
)
#: A kept file's columns, where there is none.
_NOTHING_KEPT = (
    "NULL::VARCHAR AS key, NULL::UBIGINT AS fingerprint, NULL::UBIGINT AS mark, "
    "NULL::VARCHAR AS outcome, NULL::BIGINT AS rejected, NULL::BIGINT AS refusals, "
    "NULL::TIMESTAMPTZ AS retry_at"
)
