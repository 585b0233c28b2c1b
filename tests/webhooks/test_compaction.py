"""Compaction of the inbox into the lake: idempotent, never loses an
event stored between or during runs; run by its sensor and by `python -m cli sync`."""

import threading
import uuid
from datetime import UTC, date, datetime, timedelta

import dagster as dg
import duckdb
import pytest

from assets import webhooks
from assets.inbox import BATCH_SECONDS
from assets.resources import LakeResource
from cli.main import run_sync
from pipelines.inbox.compaction import FILE_NAME, ForeignInbox
from pipelines.lake import Lake
from pipelines.pull.damaged import set_aside
from pipelines.settings import ENVIRONMENT_CONNECTIONS, load_settings
from pipelines.webhooks.compaction import WEBHOOK_COMPACTION, WEBHOOK_EVENTS, compact
from pipelines.webhooks.envelope import parse_envelope
from pipelines.webhooks.events import Arrival
from pipelines.webhooks.inbox import Inbox, inbox_path
from tests.webhooks.conftest import envelope

DAYS = [date(2026, 10, 30), date(2026, 10, 31), date(2026, 11, 1)]


def store(inbox: Inbox, day: date, n: int = 1) -> list[str]:
    """Store `n` events of `day` as the receiver would; their keys."""
    keys = []
    for _ in range(n):
        key = str(uuid.uuid4())
        at = datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=23, minutes=59)
        body = envelope(timestamp=at.isoformat(), data={"key": key})
        arrival = Arrival(key, "test", "application/json", body, datetime.now(UTC))
        assert inbox.store(arrival, parse_envelope(body))
        keys.append(key)
    return keys


def lake_rows(lake: Lake) -> list[tuple]:
    relation = lake.relation(WEBHOOK_EVENTS)
    if relation is None:
        return []
    return lake.query(f"SELECT idempotency_key, date, data ->> 'key' FROM {relation}")


def assert_lake_equals_inbox(lake: Lake, keys: dict[str, date]) -> None:
    rows = lake_rows(lake)
    assert len(rows) == len(keys), "an event is missing or doubled"
    assert {key: day for key, day, _ in rows} == keys
    assert all(key == data_key for key, _, data_key in rows)


@pytest.fixture
def inbox(tmp_path):
    with Inbox(tmp_path / "webhooks" / "inbox.sqlite3") as opened:
        yield opened


def test_a_second_run_with_nothing_new_rewrites_nothing(inbox, tmp_path):
    lake = Lake(tmp_path / "lake")
    keys = {k: day for day in DAYS for k in store(inbox, day, 3)}
    first = compact(inbox, lake)
    assert first.days == DAYS and first.rows == 9
    written = lake.written(WEBHOOK_EVENTS)
    again = compact(inbox, lake)
    assert again.days == [] and again.rows == 0
    assert lake.written(WEBHOOK_EVENTS) == written
    assert_lake_equals_inbox(lake, keys)


def test_events_stored_between_runs_land_in_their_day_even_a_compacted_one(inbox, tmp_path):
    lake = Lake(tmp_path / "lake")
    keys = {k: DAYS[1] for k in store(inbox, DAYS[1], 2)}
    compact(inbox, lake)
    # A late event of a compacted day, and one of a new day.
    keys |= {k: DAYS[1] for k in store(inbox, DAYS[1])}
    keys |= {k: DAYS[0] for k in store(inbox, DAYS[0])}
    assert compact(inbox, lake).days == [DAYS[0], DAYS[1]]
    assert_lake_equals_inbox(lake, keys)


def test_events_stored_while_compactions_run_are_never_lost(inbox, tmp_path):
    lake = Lake(tmp_path / "lake")
    keys: dict[str, date] = {}
    done = threading.Event()

    def receive() -> None:
        for n in range(300):
            day = DAYS[n % len(DAYS)]
            keys.update({k: day for k in store(inbox, day)})
        done.set()

    writer = threading.Thread(target=receive)
    writer.start()
    runs = 0
    while not done.is_set():
        compact(inbox, lake)
        runs += 1
    writer.join()
    compact(inbox, lake)
    assert runs > 1
    assert_lake_equals_inbox(lake, keys)


def test_a_lake_compacted_from_another_inbox_is_refused_not_overwritten(inbox, tmp_path):
    lake = Lake(tmp_path / "lake")
    store(inbox, DAYS[0])
    compact(inbox, lake)
    with Inbox(tmp_path / "another.sqlite3") as another:
        store(another, DAYS[0], 2)
        with pytest.raises(ForeignInbox, match="another.sqlite3"):
            compact(another, lake)
    assert len(lake_rows(lake)) == 1


def test_the_sensor_asks_for_a_run_only_while_the_lake_lacks_events(tmp_path, monkeypatch):
    monkeypatch.delenv("WEBHOOK_INBOX", raising=False)
    resource = LakeResource(
        lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "warehouse.duckdb")
    )

    def evaluate():
        with dg.build_sensor_context(resources={"lake": resource}) as context:
            return webhooks.datahub_webhooks_sensor(context)

    assert isinstance(evaluate(), dg.SkipReason)  # no inbox yet
    with Inbox(inbox_path(resource.lake_root)) as inbox:
        store(inbox, DAYS[2], 2)
        request = evaluate()
        assert isinstance(request, dg.RunRequest)
        assert request.run_key == f"{inbox.uuid}-2"
        with dg.DagsterInstance.ephemeral() as instance:
            result = dg.materialize(
                webhooks.ASSETS, resources={"lake": resource}, instance=instance
            )
        assert result.success
        assert isinstance(evaluate(), dg.SkipReason)
        store(inbox, DAYS[2])
        assert evaluate().run_key == f"{inbox.uuid}-3"


def test_the_sensor_asks_for_one_run_per_batch_not_per_tick(tmp_path, monkeypatch):
    """After a run it asked for, what arrives waits `BATCH_SECONDS` for the next, so a
    receiver storing something every minute is one run per batch in the UI's list."""
    monkeypatch.delenv("WEBHOOK_INBOX", raising=False)
    resource = LakeResource(
        lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "warehouse.duckdb")
    )

    def evaluate(cursor):
        with dg.build_sensor_context(resources={"lake": resource}, cursor=cursor) as context:
            return webhooks.datahub_webhooks_sensor(context), context.cursor

    with Inbox(inbox_path(resource.lake_root)) as inbox:
        store(inbox, DAYS[2], 2)
        first, cursor = evaluate(None)
        assert first.run_key == f"{inbox.uuid}-2"
        store(inbox, DAYS[2])
        waiting, kept = evaluate(cursor)  # a minute later: the new event waits
        assert isinstance(waiting, dg.SkipReason) and "waits until" in waiting.skip_message
        assert kept == cursor
        later = str(float(cursor) - BATCH_SECONDS)  # the batch's time has come
        request, moved = evaluate(later)
        assert request.run_key == f"{inbox.uuid}-3" and float(moved) > float(later)


def test_a_full_sync_compacts_the_inbox_into_the_warehouse(tmp_path, monkeypatch):
    for entries in ENVIRONMENT_CONNECTIONS.values():
        for _, url_variable, _ in entries:
            monkeypatch.delenv(url_variable, raising=False)
    monkeypatch.delenv("WEBHOOK_INBOX", raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("LAKE_ROOT", str(tmp_path / "lake"))
    monkeypatch.setenv("WAREHOUSE_PATH", str(tmp_path / "warehouse.duckdb"))
    (tmp_path / "sync.toml").write_text("")
    monkeypatch.setenv("SYNC_CONFIG", str(tmp_path / "sync.toml"))
    with Inbox(tmp_path / "webhooks" / "inbox.sqlite3") as inbox:
        keys = store(inbox, DAYS[0], 2) + store(inbox, DAYS[2], 3)
    report = run_sync(settings=load_settings())
    assert report.ok, report.failed
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT idempotency_key, date FROM datahub.webhook_events ORDER BY date"
        ).fetchall()
    assert sorted(k for k, _ in rows) == sorted(keys)
    assert [d for _, d in rows] == [DAYS[0]] * 2 + [DAYS[2]] * 3


@pytest.mark.parametrize("history_days", [3, 60])
def test_a_tick_and_a_compaction_cost_what_is_new_not_the_history(
    inbox, tmp_path, monkeypatch, history_days
):
    """On a lake of 3 days as of 60: the sensor's look lists nothing, reads one file (the
    watermark) and no day of the inbox; the compaction after one new event reads the
    watermark, finds one day in the inbox and writes that day, with no listing."""
    lake = Lake(tmp_path / "lake")
    for n in range(history_days):
        store(inbox, DAYS[0] - timedelta(days=n))
    compact(inbox, lake)
    read = {"listings": 0, "files": 0, "inbox_days": 0}
    listed, opened, footer = Lake._listed, Lake.parquet_file, Lake.footer
    day_watermarks = inbox.day_watermarks

    def counted(name, read_with):
        def reading(*args, **kwargs):
            answer = read_with(*args, **kwargs)
            read[name] += len(answer) if name == "inbox_days" else 1
            return answer

        return reading

    monkeypatch.setattr(Lake, "_listed", counted("listings", listed))
    monkeypatch.setattr(Lake, "parquet_file", counted("files", opened))
    monkeypatch.setattr(Lake, "footer", counted("files", footer))
    monkeypatch.setattr(inbox, "day_watermarks", counted("inbox_days", day_watermarks))

    assert WEBHOOK_COMPACTION.pending(inbox, lake) is None
    assert read == {"listings": 0, "files": 1, "inbox_days": 0}
    store(inbox, DAYS[1])
    assert WEBHOOK_COMPACTION.pending(inbox, lake) == str(history_days + 1)
    done = compact(inbox, lake)
    assert done.days == [DAYS[1]]
    assert read == {"listings": 0, "files": 3, "inbox_days": 1}
    assert WEBHOOK_COMPACTION.pending(inbox, lake) is None


def test_a_day_set_aside_is_compacted_again(inbox, tmp_path):
    """The watermark says every event is in the lake; a damaged day file moved aside makes
    it forgotten, so the next compaction compares every day and lands that one again."""
    lake = Lake(tmp_path / "lake")
    keys = {key: day for day in DAYS for key in store(inbox, day)}
    compact(inbox, lake)
    set_aside(lake, lake.path(WEBHOOK_EVENTS, FILE_NAME, DAYS[1]), "damaged, for the test")
    assert WEBHOOK_COMPACTION.pending(inbox, lake) is not None
    assert compact(inbox, lake).days == [DAYS[1]]
    assert_lake_equals_inbox(lake, keys)
