"""Events the receiver accepted but the lake cannot represent: each goes to
`datahub.webhook_quarantine` with its reason and raw body, while every other event of its day
and of the days after reaches `datahub.webhook_events`; re-runs and crashes converge."""

import json
import os
import uuid
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pytest

from pipelines import lake as lake_module
from pipelines.lake import TEMPORARY_SUFFIX, Lake
from pipelines.warehouse.relations import refresh_warehouse
from pipelines.webhooks import compaction
from pipelines.webhooks.compaction import (
    FILE_NAME,
    WEBHOOK_EVENTS,
    WEBHOOK_QUARANTINE,
    compact,
)
from pipelines.webhooks.envelope import parse_envelope
from pipelines.webhooks.events import Arrival
from pipelines.webhooks.inbox import Inbox
from tests.webhooks.conftest import envelope

DAYS = [date(2026, 10, 31), date(2026, 11, 1), date(2026, 11, 2)]
BAD_DAY = DAYS[1]
LONE_SURROGATE = "data is not valid Unicode text (a lone surrogate)"

#: `data` as the hub might send it (JSON text, as bytes) -> why the lake cannot hold it.
UNREPRESENTABLE = {
    "an escaped lone high surrogate": (b'{"n":"\\ud800"}', LONE_SURROGATE),
    "an escaped lone low surrogate": (b'{"n":"\\udfff"}', LONE_SURROGATE),
    "a high surrogate then no low one": (b'{"n":"\\ud800\\u0041"}', LONE_SURROGATE),
    "a lone surrogate in a key": (b'{"\\ud800":1}', LONE_SURROGATE),
    "a lone surrogate deep inside": (b'{"items":[{"n":["ok","\\udbff"]}]}', LONE_SURROGATE),
}
#: `data` that looks alike but the lake holds as it came -> what `data` reads back as.
REPRESENTABLE = {
    "NUL characters": (b'{"n":"a\\u0000b\\u0000"}', {"n": "a\x00b\x00"}),
    "right-to-left marks": (
        '{"n":"\u200f\u202eabc\u202c"}'.encode(),
        {"n": "\u200f\u202eabc\u202c"},
    ),
    "a 4-byte emoji": ('{"n":"\U0001f600"}'.encode(), {"n": "\U0001f600"}),
    "an escaped surrogate pair": (b'{"n":"\\ud83d\\ude00"}', {"n": "\U0001f600"}),
    "control characters": (b'{"n":"\\u0001\\t\\u001f"}', {"n": "\x01\t\x1f"}),
}


def with_data(day: date, data: bytes, event: str = "message.open") -> bytes:
    """A body of `day` whose `data` is exactly the JSON text `data`."""
    at = datetime(day.year, day.month, day.day, 12, tzinfo=UTC).isoformat()
    return envelope(event, timestamp=at, data={"PLACE": 0}).replace(b'{"PLACE":0}', data)


def normal(day: date) -> bytes:
    return with_data(day, json.dumps({"line_uid": str(uuid.uuid4())}).encode())


def stored(inbox: Inbox, body: bytes) -> str:
    """Store `body` as the receiver would; its key."""
    key = str(uuid.uuid4())
    arrival = Arrival(key, "test", "application/json", body, datetime.now(UTC))
    assert inbox.store(arrival, parse_envelope(body))
    return key


def temporary_files(root: str) -> list[Path]:
    return list(Path(root).glob(f"**/*{TEMPORARY_SUFFIX}"))


def quarantine_rows(lake: Lake) -> list[tuple]:
    relation = lake.relation(WEBHOOK_QUARANTINE)
    if relation is None:
        return []
    return lake.query(f"SELECT idempotency_key, date, reason, body FROM {relation} ORDER BY 1")


def event_keys(lake: Lake) -> set[str]:
    return {
        key for (key,) in lake.query(f"SELECT idempotency_key FROM {lake.relation(WEBHOOK_EVENTS)}")
    }


@pytest.fixture
def inbox(tmp_path):
    with Inbox(tmp_path / "webhooks" / "inbox.sqlite3") as opened:
        yield opened


def test_every_accepted_body_reaches_the_warehouse_or_the_quarantine(receiver, tmp_path):
    """Through the receiver, the compaction and the warehouse: the events the lake cannot
    represent are quarantined with the exact bytes; all the others, on their day and the days
    after, read back through the views exactly as sent."""
    deliveries: dict[str, bytes] = {}

    def deliver(body: bytes) -> str:
        key = str(uuid.uuid4())
        answer = receiver.deliver(body, key)
        assert answer.status_code == 200 and answer.json()["status"] == "stored", answer.text
        deliveries[key] = body
        return key

    good = {deliver(normal(day)) for day in DAYS for _ in range(2)}
    bad = {deliver(with_data(BAD_DAY, data)): reason for data, reason in UNREPRESENTABLE.values()}
    exact = {deliver(with_data(BAD_DAY, data)): value for data, value in REPRESENTABLE.values()}
    # A profile field DuckDB would read as a JSON path: a row, whose value the view leaves NULL.
    odd_field = deliver(with_data(BAD_DAY, b'{"customer_id":"c-1"}', "contact.profile.$[.update"))
    good |= {*exact, odd_field, *(deliver(normal(day)) for day in DAYS)}  # after the bad ones

    lake = Lake(tmp_path / "lake")
    done = compact(receiver.inbox, lake)
    assert (done.days, done.rows, done.quarantined) == (DAYS, len(good), len(bad))
    assert compact(receiver.inbox, lake).days == []
    assert not temporary_files(tmp_path / "lake")

    warehouse = tmp_path / "warehouse.duckdb"
    refresh_warehouse(tmp_path / "lake", warehouse, ())
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute(
            "SELECT idempotency_key, date, data::VARCHAR FROM datahub.webhook_events"
        )
        landed = {key: (day, json.loads(data)) for key, day, data in rows.fetchall()}
        assert set(landed) == good
        for key in good:
            sent = json.loads(deliveries[key])
            assert landed[key] == (date.fromisoformat(sent["timestamp"][:10]), sent["data"])
        values = con.execute(
            "SELECT idempotency_key, data ->> 'n' FROM datahub.webhook_events "
            "WHERE list_contains(?, idempotency_key)",
            [list(exact)],
        )
        assert dict(values.fetchall()) == {key: value["n"] for key, value in exact.items()}
        quarantined = con.execute(
            "SELECT idempotency_key, date, reason, body FROM datahub.webhook_quarantine"
        ).fetchall()
        assert {key: (day, reason, body) for key, day, reason, body in quarantined} == {
            key: (BAD_DAY, reason, deliveries[key]) for key, reason in bad.items()
        }
        # Every view over the events reads all of them: none is broken by one row.
        views = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'datahub'"
        ).fetchall()
        for (view,) in views:
            con.execute(f"SELECT * FROM datahub.{view}").fetchall()
        profile = con.execute(
            "SELECT field, value FROM datahub.profile_changes WHERE idempotency_key = ?",
            [odd_field],
        ).fetchall()
        assert profile == [("$[", None)]


def test_a_crash_between_the_quarantine_and_the_events_file_converges(inbox, tmp_path, monkeypatch):
    lake = Lake(tmp_path / "lake")
    keys = {stored(inbox, normal(day)) for day in DAYS}
    bad = stored(inbox, with_data(BAD_DAY, b'{"n":"\\ud800"}'))
    events_file = lake.path(WEBHOOK_EVENTS, FILE_NAME, BAD_DAY)
    replace = os.replace

    def killed_before_the_events_file(source, target):
        if str(target) == events_file:
            raise OSError("killed")
        replace(source, target)

    monkeypatch.setattr(lake_module.os, "replace", killed_before_the_events_file)
    with pytest.raises(OSError, match="killed"):
        compact(inbox, lake)
    monkeypatch.undo()
    # The day before is done, the bad day's quarantine is written and its events are not.
    assert lake.days(WEBHOOK_EVENTS, FILE_NAME) == DAYS[:1]
    assert [row[0] for row in quarantine_rows(lake)] == [bad]
    assert not temporary_files(lake.root)

    assert compact(inbox, lake).days == DAYS[1:]
    assert event_keys(lake) == keys
    assert [row[0] for row in quarantine_rows(lake)] == [bad]
    # A late event of the day rewrites it: its quarantine is rewritten, not added to.
    late_bad = stored(inbox, with_data(BAD_DAY, b'{"n":"\\udc00"}'))
    keys.add(stored(inbox, normal(BAD_DAY)))
    assert compact(inbox, lake).days == [BAD_DAY]
    assert event_keys(lake) == keys
    assert sorted(row[0] for row in quarantine_rows(lake)) == sorted([bad, late_bad])
    assert not temporary_files(lake.root)


def test_a_day_rewritten_with_nothing_to_quarantine_loses_its_quarantine_file(
    inbox, tmp_path, monkeypatch
):
    """As after an upgrade that represents what an older version quarantined."""
    lake = Lake(tmp_path / "lake")
    once_refused = stored(inbox, normal(BAD_DAY))
    row = compaction._row
    monkeypatch.setattr(
        compaction,
        "_row",
        lambda event: "refused" if event.idempotency_key == once_refused else row(event),
    )
    assert compact(inbox, lake).quarantined == 1
    assert [row[0] for row in quarantine_rows(lake)] == [once_refused]
    monkeypatch.undo()

    other = stored(inbox, normal(BAD_DAY))
    assert compact(inbox, lake).quarantined == 0
    assert not lake.exists(lake.path(WEBHOOK_QUARANTINE, FILE_NAME, BAD_DAY))
    assert event_keys(lake) == {once_refused, other}


def test_rows_arrow_or_duckdb_would_refuse_are_quarantined_one_by_one(inbox, tmp_path, monkeypatch):
    """The checks after the conversion: a row Arrow cannot build, `data` DuckDB cannot read
    (text that is valid UTF-8, so only DuckDB says no), in chunks of two events."""
    monkeypatch.setattr(compaction, "CHUNK_EVENTS", 2)
    lake = Lake(tmp_path / "lake")
    keys = [stored(inbox, normal(BAD_DAY)) for _ in range(5)]
    arrow_refuses, duckdb_refuses = keys[1], keys[2]  # together in the second chunk
    row = compaction._row

    def altered(event):
        built = row(event)
        if event.idempotency_key == arrow_refuses:
            built["source"] = "\udc80"
        if event.idempotency_key == duckdb_refuses:
            built["data"] = '{"n":"\\ud800"}'
        return built

    monkeypatch.setattr(compaction, "_row", altered)
    assert compact(inbox, lake).quarantined == 2
    assert event_keys(lake) == set(keys) - {arrow_refuses, duckdb_refuses}
    reasons = {key: reason for key, _, reason, _ in quarantine_rows(lake)}
    assert reasons[arrow_refuses].startswith("not a row of webhook_events (UnicodeEncodeError")
    assert reasons[duckdb_refuses].startswith("DuckDB cannot read data as JSON (")
    assert "no low surrogate" in reasons[duckdb_refuses]
    assert not temporary_files(lake.root)
