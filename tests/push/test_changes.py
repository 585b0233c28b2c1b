"""The push decides in DuckDB which keys may need a request (pipelines/push/changes.py): a push
with nothing new plans no row in Python, one with N changed keys plans those N, a row the
service refused waits for a change or its retry, and what is skipped still counts in the
figures and in `sync.rejected`. Run through `RecordTypePush` (pipelines/push/run.py) with the
real ledger, journal and sender; the service is a stand-in that refuses what it is told to.
The sandbox shows the same end to end (test_push.py)."""

import weakref
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import time_machine

from pipelines.lake import Lake
from pipelines.push import changes as push_changes
from pipelines.push import run as push_run
from pipelines.push.changes import Changes, mark_ledger
from pipelines.push.ledger import Ledger, rejected_now
from pipelines.push.plan import make_plan
from pipelines.push.progress import RecordTypeProgress
from pipelines.push.run import RecordTypePush
from pipelines.streams.pushed import PUSH_STATE, PUSHED
from pipelines.transport import ServiceError
from pipelines.warehouse import PUSH_SETTINGS
from pipelines.warehouse.relations import warehouse_of
from tests.push.test_plan import ELEVEN, TEN, order

NOW = datetime(2026, 11, 2, 8, tzinfo=UTC)
ORDERS = 30


class Hub:
    """Takes every order but those it is told to refuse; remembers what it was sent."""

    def __init__(self) -> None:
        self.refuse: set[str] = set()
        self.sent: list[str] = []

    def submit(self, record_type: str, body: dict, idempotent: bool = True) -> str:
        self.sent.append(body["id"])
        if body["id"] in self.refuse:
            refusal = {"error": {"code": "invalid_value", "field": "items"}}
            raise ServiceError("push to", "default", 422, refusal)
        return f"ev-{len(self.sent)}"


class Shop:
    """`outbound.orders` over a table of rows that a test changes, in the push's DuckDB."""

    def __init__(self, tmp_path, monkeypatch) -> None:
        self.lake = Lake(tmp_path / "lake")
        self.journal = tmp_path / "journal"
        self.con = duckdb.connect()
        self.con.execute("CREATE SCHEMA outbound")
        self.hub = Hub()
        self.rows = [order(TEN, id=f"ord-{n:02}") for n in range(ORDERS)]
        # Invalid (a currency of four letters): rejected, kept in sync.rejected.
        self.rows.append(order(TEN, id="ord-bad", currency="TWDX"))
        # Newest version invalid: the key waits.
        self.rows += [order(TEN, id="ord-wait"), order(ELEVEN, id="ord-wait", currency="TWDX")]
        self.planned: list[list[str]] = []  # the keys of each plan made
        monkeypatch.setattr(push_run, "make_plan", self._spied)

    def _spied(self, record_type, rows, *args, **kwargs):
        rows = list(rows)
        self.planned.append([row["id"] for row in rows])
        return make_plan(record_type, rows, *args, **kwargs)

    def push(self, dry_run: bool = False, retry_refused: bool = False) -> dict[str, int]:
        self.con.register("shop_rows", pa.Table.from_pylist(self.rows))
        self.con.execute("CREATE OR REPLACE TABLE shop_orders AS SELECT * FROM shop_rows")
        self.con.execute("CREATE OR REPLACE VIEW outbound.orders AS SELECT * FROM shop_orders")
        self.planned.clear()
        with Ledger(self.lake, self.journal) as ledger:
            ledger.compact()
            mark_ledger(self.con, self.lake)
            sender = None
            if not dry_run:
                sender = partial(
                    push_run._send, to={"default": self.hub}, ledger=ledger, lease=None
                )
            self.progress = RecordTypeProgress("order")
            pushed = RecordTypePush(
                "order", "outbound.orders", ledger, sender, {}, False, self.progress
            )
            figures, rejections = pushed.run(self.con, True, retry_refused)
            if not dry_run:
                ledger.reject("order", rejections)
        return figures

    def planned_keys(self) -> set[str]:
        return {key for keys in self.planned for key in keys}

    def rejected(self) -> set[tuple[str, str, str]]:
        rows = rejected_now(self.lake, "order", 1000)
        return {(row["key"], row["source"], row["field"]) for row in rows}


@pytest.fixture
def shop(tmp_path, monkeypatch):
    with time_machine.travel(NOW, tick=True):
        yield Shop(tmp_path, monkeypatch)


def test_a_push_with_nothing_new_plans_no_row_and_counts_as_the_last(shop):
    first = shop.push()
    assert first["new"] == ORDERS and sorted(shop.hub.sent) == [
        f"ord-{n:02}" for n in range(ORDERS)
    ]
    second = shop.push()  # what was sent is now unchanged: decided in Python once more
    assert second["unchanged"] == ORDERS and second["sent"] == 0
    rejected = shop.rejected()
    assert ("ord-bad", "validation", "currency") in rejected
    assert ("ord-wait", "waiting", "timestamp") in rejected

    third = shop.push()
    assert shop.planned == []  # no row of the view reached Python
    assert third == second
    assert shop.rejected() == rejected  # the skipped keys' rejections are kept
    assert shop.push(dry_run=True) == {
        k: v for k, v in second.items() if k not in ("sent", "refused")
    }
    assert shop.planned == []
    assert len(shop.hub.sent) == ORDERS


def test_a_push_with_n_changed_keys_plans_those_n(shop):
    shop.push()
    shop.push()
    changed = {"ord-03", "ord-17", "ord-29"}
    shop.rows += [order(ELEVEN, id=key, status="returned") for key in sorted(changed)]
    shop.rows.append(order(TEN, id="ord-new"))
    shop.hub.sent.clear()
    figures = shop.push()
    assert shop.planned_keys() == changed | {"ord-new"}
    assert sorted(shop.hub.sent) == sorted(changed | {"ord-new"})
    assert (figures["changed"], figures["new"], figures["unchanged"]) == (3, 1, ORDERS - 3)
    # What a live display shows of it (pipelines/push/progress.py): the keys DuckDB handed,
    # each planned, and the service's answers.
    progress = shop.progress
    assert (progress.handed, progress.planned, progress.to_send, progress.accepted) == (4, 4, 4, 4)
    # A key that left the view is forgotten: it counts nowhere.
    shop.rows = [row for row in shop.rows if row["id"] != "ord-05"]
    assert shop.push()["unchanged"] == ORDERS - 1 + 1  # ord-new is unchanged now
    assert shop.planned_keys() == changed | {"ord-new"}  # planned once more after their send


def test_a_key_whose_rows_change_places_is_planned_again(shop):
    """A key's fingerprint is of its rows in view order: a plan may decide otherwise on the
    same rows in another order (the last one is the newest where there is no timestamp)."""
    shop.rows += [order(TEN, id="ord-two"), order(ELEVEN, id="ord-two", status="returned")]
    shop.push()
    shop.push()
    assert shop.push() and shop.planned == []
    first, second = (i for i, row in enumerate(shop.rows) if row["id"] == "ord-two")
    shop.rows[first], shop.rows[second] = shop.rows[second], shop.rows[first]
    shop.push()
    assert shop.planned_keys() == {"ord-two"}


def test_the_fixed_invalid_row_is_planned_and_sent(shop):
    shop.push()
    shop.push()
    shop.rows = [row for row in shop.rows if row["id"] != "ord-wait"]
    shop.rows += [order(TEN, id="ord-wait"), order(ELEVEN, id="ord-wait", status="returned")]
    shop.hub.sent.clear()
    figures = shop.push()
    assert shop.planned_keys() == {"ord-wait"}
    assert shop.hub.sent == ["ord-wait"] and figures["waiting"] == 0
    assert not any(key == "ord-wait" for key, _, _ in shop.rejected())


def test_a_refused_row_waits_for_a_change_or_its_retry(shop):
    shop.hub.refuse = {"ord-07"}
    first = shop.push()
    assert first["refused"] == 1 and ("ord-07", "service", "items") in shop.rejected()
    shop.hub.sent.clear()

    again = shop.push()  # unchanged: not sent again, still listed, counted apart
    assert "ord-07" not in shop.hub.sent and "ord-07" not in shop.planned_keys()
    assert again["refused_before"] == 1 and again["refused"] == 0
    assert ("ord-07", "service", "items") in shop.rejected()

    with time_machine.travel(NOW + timedelta(minutes=59), tick=True):
        shop.push()
        assert shop.hub.sent == []
    with time_machine.travel(NOW + timedelta(minutes=61), tick=True):
        retried = shop.push()  # its first retry, an hour after the refusal
    assert shop.hub.sent == ["ord-07"] and retried["refused"] == 1
    with time_machine.travel(NOW + timedelta(minutes=61 + 100), tick=True):
        shop.push()  # the wait doubled: two hours after the second refusal
    assert shop.hub.sent == ["ord-07"]
    with time_machine.travel(NOW + timedelta(minutes=61 + 121), tick=True):
        shop.push()
    assert shop.hub.sent == ["ord-07", "ord-07"]

    shop.push(retry_refused=True)  # asked for: sent at once
    assert shop.hub.sent.count("ord-07") == 3

    shop.hub.refuse.clear()
    shop.rows.append(order(ELEVEN, id="ord-07", status="returned"))  # changed: sent at once
    fixed = shop.push()
    assert shop.hub.sent.count("ord-07") == 4 and fixed["sent"] == 1
    assert not any(key == "ord-07" for key, _, _ in shop.rejected())


def test_a_lost_or_damaged_state_plans_everything_again_with_the_same_figures(shop):
    shop.push()
    settled = shop.push()
    path = shop.lake.path(PUSH_STATE, "order")
    with shop.lake.fs.open_output_stream(path) as out:
        out.write(b"not parquet")
    assert shop.push() == settled and len(shop.planned_keys()) == ORDERS + 2
    shop.lake.fs.delete_file(path)
    assert shop.push() == settled and len(shop.planned_keys()) == ORDERS + 2
    shop.push()
    assert shop.planned == []


def test_a_key_duckdb_writes_otherwise_plans_the_view_whole(shop):
    """A key column of a type DuckDB writes otherwise than Python (bytes: `ord` against
    `b'ord'`): every row is planned, as before the state was kept."""
    shop.rows = [order(TEN, id=b"ord")]
    figures = shop.push()
    assert figures["rejected"] == 1 and shop.planned == [[b"ord"]]
    assert not shop.lake.exists(shop.lake.path(PUSH_STATE, "order"))
    # Shown as the keys planned alone: how many the view has is not counted first.
    assert (shop.progress.handed, shop.progress.planned, shop.progress.rejected) == (None, 1, 1)


@pytest.mark.parametrize(
    "key",
    [TEN, TEN.replace(microsecond=500_000), TEN.replace(tzinfo=None), True],
    ids=["timestamp", "with a fraction", "without a zone", "boolean"],
)
def test_a_key_of_a_timestamp_or_a_boolean_is_keyed_as_python_keys_it(shop, key):
    """Such keys (a conversation close is keyed by its `closed_at`) are written alike in
    DuckDB and Python: the state is kept and the next push plans nothing."""
    shop.rows = [order(TEN, id=key)]
    assert shop.push()["rejected"] == 1 and shop.planned == [[key]]
    assert shop.lake.exists(shop.lake.path(PUSH_STATE, "order"))
    assert shop.push()["rejected"] == 1 and shop.planned == []


def test_python_holds_one_batch_at_a_time(shop, monkeypatch):
    """A batch's rows are let go of once planned, and its plan once sent, before the next
    batch is read: Python's memory is one batch's, whatever the view holds."""
    monkeypatch.setattr(push_changes, "KEYS_AT_A_TIME", 4)
    made: list[weakref.ref] = []  # every batch and plan made so far
    unwatched_batches, unwatched_plan = Changes.batches, push_run.make_plan

    def batches(self):
        for batch in unwatched_batches(self):
            assert [alive for alive in made if alive() is not None] == []
            made.append(weakref.ref(batch))
            yield batch
            del batch

    def plan(*args, **kwargs):
        made.append(weakref.ref(planned := unwatched_plan(*args, **kwargs)))
        return planned

    monkeypatch.setattr(Changes, "batches", batches)
    monkeypatch.setattr(push_run, "make_plan", plan)
    assert shop.push()["new"] == ORDERS
    assert len(made) == 2 * len(shop.planned) and len(shop.planned) > 2


def pushs_duckdb(tmp_path, view: str):
    """The push's DuckDB (`Warehouse.in_memory`) over `outbound.orders` defined as `view`,
    with the ledger's marks read, and the lake."""
    (tmp_path / "sql" / "outbound").mkdir(parents=True)
    (tmp_path / "sql" / "outbound" / "orders.sql").write_text(
        f"CREATE VIEW outbound.orders AS {view}"
    )
    lake = Lake(tmp_path / "lake")
    warehouse = warehouse_of(tmp_path / "lake", tmp_path / "warehouse.duckdb", [tmp_path / "sql"])
    return lake, warehouse.in_memory(["SELECT * FROM outbound.orders"])


#: The push's memory lowered, so that a small view exceeds it.
LOWERED = "16MB"


def limit_of(con: duckdb.DuckDBPyConnection) -> str:
    [(limit,)] = con.execute("SELECT current_setting('memory_limit')").fetchall()
    return limit


def memory_of(con: duckdb.DuckDBPyConnection) -> tuple[bool, int]:
    """Whether the DuckDB keeps to the lowered memory, and what it holds in its temporary
    folder."""
    with duckdb.connect(config={"memory_limit": LOWERED}) as lowered:
        kept = limit_of(con) == limit_of(lowered)
    [(spilled,)] = con.execute(
        "SELECT sum(temporary_storage_bytes) FROM duckdb_memory()"
    ).fetchall()
    return kept, spilled


def test_the_pushs_duckdb_spills_its_work_beyond_its_memory(tmp_path, monkeypatch):
    """A key a row: the work tables grow with the view's keys, and beyond the push's memory
    (`PUSH_SETTINGS`) they go to the temporary folder instead of growing the push."""
    monkeypatch.setitem(PUSH_SETTINGS, "memory_limit", LOWERED)
    keys = 250_000
    lake, in_memory = pushs_duckdb(
        tmp_path, f"SELECT 'ord-' || i AS id, 'completed' AS status FROM range({keys}) r(i)"
    )
    with in_memory as con:
        mark_ledger(con, lake)
        changes = Changes(con, lake, "order", "outbound.orders", "context", NOW)
        assert changes.handed() == keys
        kept, spilled = memory_of(con)
    assert kept and spilled > 0


def test_a_view_duckdb_cannot_run_within_the_pushs_memory_runs_without_it(tmp_path, monkeypatch):
    """A window over wide rows does not spill: such a view is read without the limit rather
    than failing the push."""
    monkeypatch.setitem(PUSH_SETTINGS, "memory_limit", LOWERED)
    lake, in_memory = pushs_duckdb(
        tmp_path,
        "SELECT * FROM ("
        "SELECT 'ord-' || (i % 5000) AS id, repeat('x', 1000) || i AS note, i AS n "
        "FROM range(50000) r(i)"
        ") QUALIFY row_number() OVER (PARTITION BY id ORDER BY n DESC) <= 2",
    )
    with in_memory as con:
        with pytest.raises(duckdb.OutOfMemoryException):
            con.execute("SELECT max(note) FROM outbound.orders").fetchall()
        mark_ledger(con, lake)
        changes = Changes(con, lake, "order", "outbound.orders", "context", NOW)
        rows = [row for batch in changes.batches() for row in batch.rows]
        kept, _ = memory_of(con)
    assert len(rows) == 10_000 and len({row["id"] for row in rows}) == 5000
    assert not kept


def test_the_ledgers_marks_keep_to_the_pushs_memory(tmp_path):
    """Every push reads each key's mark: however many entries the ledger holds, within the
    push's memory (a number kept per key, not its newest entry, which would not fit)."""
    lake, in_memory = pushs_duckdb(tmp_path, "SELECT 'ord-1' AS id, 'completed' AS status")
    folder = Path(lake.uri(lake.stream_dir(PUSHED)))
    folder.mkdir(parents=True)
    keys = 100_000
    duckdb.execute(
        "COPY (SELECT 'order' AS record_type, 'ord-' || (i % $keys) AS key, "
        "TIMESTAMPTZ '2026-11-01 00:00:00+00' + to_seconds(i) AS timestamp, "
        "md5(i::VARCHAR) AS content_hash, repeat('x', 300) AS content, 'accepted' AS state, "
        "NULL::VARCHAR AS event_id, NULL::BIGINT AS task_id, "
        "NULL::BIGINT AS updated_contact_size, 'default' AS connection, "
        "TIMESTAMPTZ '2026-11-02 00:00:00+00' + to_seconds(i) AS pushed_at "
        f"FROM range(2 * $keys) r(i)) TO '{folder / 'ledger.parquet'}' (FORMAT parquet)",
        {"keys": keys},
    )
    with in_memory as con:
        mark_ledger(con, lake)
        [(marked,)] = con.execute("SELECT count(*) FROM push_work.marks").fetchall()
        limit = limit_of(con)
    with duckdb.connect(config={"memory_limit": PUSH_SETTINGS["memory_limit"]}) as limited:
        assert marked == keys and limit == limit_of(limited)
