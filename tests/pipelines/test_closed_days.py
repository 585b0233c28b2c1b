"""Closed days as tables of the warehouse file (pipelines/warehouse/closed_days.py,
pipelines/warehouse/__init__.py):
each row seen once by every query, before, during and after a build, whatever happens to the
build; open days read from the lake at once."""

import subprocess
import sys
import threading
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa

from cli.main import run_sync
from pipelines.lake import Lake
from pipelines.pull.landing import today
from pipelines.registry import PULLED
from pipelines.settings import load_settings
from pipelines.stream import Stream, connection_schema
from pipelines.warehouse import LOCK_SUFFIX, Warehouse
from pipelines.warehouse.closed_days import OPEN_DAYS, built_state

EVENTS = Stream("svc", "events", connection_schema([("id", pa.int64())]), daily=True)
FIRST = date(2026, 10, 1)
#: A build in a process of its own: the lake, the file, and the day it counts from.
BUILD = """
import sys
from datetime import date
import pyarrow as pa
from pipelines.lake import Lake
from pipelines.stream import Stream, connection_schema
from pipelines.warehouse import Warehouse
events = Stream("svc", "events", connection_schema([("id", pa.int64())]), daily=True)
today = date.fromisoformat(sys.argv[3])
Warehouse(sys.argv[2], Lake(sys.argv[1]), [events], sql_dir=sys.argv[4], viewed=[events],
          clock=lambda: today).refresh()
"""


def land(lake: Lake, day: date, rows: int, connection: str = "a", start: int | None = None) -> None:
    first = (day - FIRST).days * 10_000 if start is None else start
    ids = range(first, first + rows)
    lake.write(EVENTS, connection, [{"connection": connection, "id": i} for i in ids], day=day)


def warehouse(tmp_path: Path, today: date) -> Warehouse:
    sql = tmp_path / "sql"
    sql.mkdir(exist_ok=True)
    lake = Lake(tmp_path / "lake")
    path = tmp_path / "warehouse.duckdb"
    return Warehouse(path, lake, [EVENTS], sql_dir=sql, viewed=[EVENTS], clock=lambda: today)


def landed_over(tmp_path: Path, days: int, rows: int) -> Warehouse:
    """A warehouse over `days` days of `rows` rows each, the last one today, not built."""
    built = warehouse(tmp_path, FIRST + timedelta(days=days - 1))
    for n in range(days):
        land(built.lake, FIRST + timedelta(days=n), rows)
    return built


def built_over(tmp_path: Path, days: int, rows: int) -> Warehouse:
    built = landed_over(tmp_path, days, rows)
    built.refresh()
    return built


def display_wanted(path: Path) -> tuple[int, int]:
    """Rows and distinct (connection, id) of the view, in a new connection."""
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(
            "SELECT count(*), count(DISTINCT (connection, id)) FROM svc.events"
        ).fetchone()


def in_lake(lake: Lake) -> list[tuple]:
    """Every row of the stream, read from its files: what the views must show."""
    with lake.connect() as con:
        return sorted(
            con.execute(f"SELECT connection, date, id FROM {lake.relation(EVENTS)}").fetchall()
        )


def in_view(path: Path) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:
        return sorted(con.execute("SELECT connection, date, id FROM svc.events").fetchall())


def test_closed_days_are_copied_and_open_days_read_from_the_lake(tmp_path):
    today = FIRST + timedelta(days=4)
    built = warehouse(tmp_path, today)
    for n in range(5):
        land(built.lake, FIRST + timedelta(days=n), 100)
    assert built.refresh() == "views rewritten"

    state = built_state(built.path)
    first_open = today - timedelta(days=OPEN_DAYS - 1)
    assert sorted(state.copied["svc.events"]) == [
        FIRST + timedelta(days=n) for n in range(5) if FIRST + timedelta(days=n) < first_open
    ]
    assert {day for _, day in state.read} == {first_open, today}
    with duckdb.connect(str(built.path), read_only=True) as con:
        copied = con.execute('SELECT count(*) FROM _lake."svc.events"').fetchone()[0]
    assert copied == 100 * (5 - OPEN_DAYS)
    assert in_view(built.path) == in_lake(built.lake)


def test_an_open_day_shows_at_once_and_costs_no_build(tmp_path):
    built = built_over(tmp_path, days=3, rows=10)
    today = built.clock()
    before = built.path.stat().st_ino
    with duckdb.connect(str(built.path), read_only=True) as session:
        land(built.lake, today, 25)
        land(built.lake, today, 5, connection="b")
        # no build: the session open before the landing counts the new rows
        assert session.execute("SELECT count(*) FROM svc.events").fetchone()[0] == 10 + 10 + 30
    assert built.refresh(written={("svc.events", today)}) is None
    assert built.path.stat().st_ino == before
    assert in_view(built.path) == in_lake(built.lake)


def test_a_closed_day_landed_again_or_a_new_day_rebuilds_with_the_lakes_rows(tmp_path):
    built = built_over(tmp_path, days=4, rows=10)
    today = built.clock()

    land(built.lake, FIRST, 3, start=500)  # a backfill: fewer rows, other ids
    assert built.refresh(written={("svc.events", FIRST)}) == "views rewritten"
    assert in_view(built.path) == in_lake(built.lake)
    assert display_wanted(built.path) == (33, 33)

    built.lake.drop(EVENTS, "a", FIRST + timedelta(days=1))  # a day gone (set aside)
    later = warehouse(tmp_path, today + timedelta(days=1))
    land(later.lake, today + timedelta(days=1), 7)  # a new day, and a day closes
    assert later.refresh(written={("svc.events", today + timedelta(days=1))}) == "views rewritten"
    assert in_view(later.path) == in_lake(later.lake)
    assert later.refresh() is None  # nothing changed since


def test_a_query_during_builds_sees_each_row_exactly_once(tmp_path):
    """Builds move days from the lake's files into the tables, and replace closed days
    whole, while queries in new connections and in a session held throughout count: every
    count is every row, once."""
    days = 40
    built = warehouse(tmp_path, FIRST + timedelta(days=days - 1))
    for n in range(days):
        land(built.lake, FIRST + timedelta(days=n), 500)
    opening = warehouse(tmp_path, FIRST)  # every day open
    opening.refresh()
    total = days * 500
    seen: list[tuple[int, int]] = []
    stop = threading.Event()

    def count() -> None:
        with duckdb.connect(str(built.path), read_only=True) as held:
            while not stop.is_set():
                seen.append(display_wanted(built.path))
                seen.append(
                    held.execute("SELECT count(*), count(DISTINCT id) FROM svc.events").fetchone()
                )

    reader = threading.Thread(target=count)
    reader.start()
    try:
        for n in range(0, days, 4):  # days close a few at a time
            warehouse(tmp_path, FIRST + timedelta(days=n)).refresh()
            land(built.lake, FIRST + timedelta(days=n // 2), 500)  # the same rows, written again
            warehouse(tmp_path, FIRST + timedelta(days=n)).refresh()
    finally:
        stop.set()
        reader.join()
    assert len(seen) > 20
    assert set(seen) == {(total, total)}
    assert in_view(built.path) == in_lake(built.lake)


def build_in_process(tmp_path: Path, today: date) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            BUILD,
            str(tmp_path / "lake"),
            str(tmp_path / "warehouse.duckdb"),
            today.isoformat(),
            str(tmp_path / "sql"),
        ]
    )


def test_a_build_killed_at_any_point_leaves_the_next_one_exact(tmp_path):
    built = landed_over(tmp_path, days=60, rows=2_000)
    today = built.clock()
    for delay in (0.3, 0.6, 0.9, 1.2, 1.5, 2.0):
        land(built.lake, FIRST + timedelta(days=int(delay * 10)), 1_000)  # a closed day changes
        build = build_in_process(tmp_path, today)
        try:
            build.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            build.kill()
        build.wait()
        assert built.refresh() in (None, "views rewritten")
        assert in_view(built.path) == in_lake(built.lake)
    assert built.refresh() is None
    left = [f for f in tmp_path.glob(".*") if not f.name.endswith(LOCK_SUFFIX)]
    assert not left, "a killed build's files were not removed by the next"


def test_two_builds_at_once_take_turns_and_stay_exact(tmp_path):
    built = landed_over(tmp_path, days=30, rows=2_000)
    builds = [build_in_process(tmp_path, built.clock()) for _ in range(2)]
    assert [b.wait(timeout=120) for b in builds] == [0, 0]
    assert in_view(built.path) == in_lake(built.lake)
    assert built.refresh() is None  # the second found the first's build current


def test_a_sync_of_several_streams_builds_once_and_its_views_show_every_landed_row(
    frozen_sandbox, sync_env, tmp_path, monkeypatch
):
    """The command line's sync builds when its runs have ended, not once per stream: the
    frozen sandbox's days are all closed by the wall clock, so each landing would build."""
    sync_env(frozen_sandbox)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    builds = []
    build = Warehouse._build
    monkeypatch.setattr(Warehouse, "_build", lambda self, t: builds.append(t) or build(self, t))

    report = run_sync(["comment"], start=today() - timedelta(days=2))

    assert report.ok, report.failed
    assert len(report.succeeded) > 1 and len(builds) == 1, (report.succeeded, builds)
    settings = load_settings()
    lake = Lake(settings.lake_root)
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        for stream in (s for s in PULLED if s.service == "comment"):
            [(shown,)] = con.execute(f"SELECT count(*) FROM {stream.relation}").fetchall()
            with lake.connect() as files:
                [(landed,)] = files.execute(
                    f"SELECT count(*) FROM {lake.relation(stream)}"
                ).fetchall()
            assert shown == landed, stream.relation


def test_a_tables_identifier_is_stored_for_lookups_and_an_older_builds_table_is_made_anew(
    tmp_path,
):
    """A text id of the key is kept uncompressed, so a lookup by it scans as fast as a native
    table's (docs/warehouse.md); a table an older build made otherwise (compressed, with an
    index on its key) is made anew by the next build, equal to the lake."""
    named = Stream("svc", "named", connection_schema([("id", pa.string())]), daily=True)
    lake, path, sql = Lake(tmp_path / "lake"), tmp_path / "warehouse.duckdb", tmp_path / "sql"
    sql.mkdir()
    days = [FIRST + timedelta(days=n) for n in range(6)]

    def land_named(day: date) -> None:
        rows = [{"connection": "a", "id": f"{day}-{n}"} for n in range(200)]
        lake.write(named, "a", rows, day=day)

    def build(today: date) -> None:
        Warehouse(path, lake, [named], sql_dir=sql, viewed=[named], clock=lambda: today).refresh()

    def stored() -> set[str]:
        with duckdb.connect(str(path), read_only=True) as con:
            return {
                kind
                for (kind,) in con.execute(
                    "SELECT DISTINCT compression FROM pragma_storage_info('_lake.\"svc.named\"') "
                    "WHERE column_name = 'id' AND compression <> 'Constant'"
                ).fetchall()
            }

    for day in days[:-1]:
        land_named(day)
    build(days[-2])
    assert stored() == {"Uncompressed"}
    with duckdb.connect(str(path)) as con:  # as an older build left it
        table = '_lake."svc.named"'
        con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM {table}")
        con.execute(f'CREATE INDEX "svc.named key" ON {table} (connection, id)')
        con.execute("CHECKPOINT")
    assert stored() != {"Uncompressed"}
    land_named(days[-1])
    build(days[-1])
    assert stored() == {"Uncompressed"}
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM duckdb_indexes()").fetchone() == (0,)
        shown_rows = sorted(con.execute("SELECT connection, date, id FROM svc.named").fetchall())
    with lake.connect() as con:
        landed = sorted(
            con.execute(f"SELECT connection, date, id FROM {lake.relation(named)}").fetchall()
        )
    assert shown_rows == landed and len(landed) == 6 * 200
