"""The data hub's streams without Dagster or the sandbox: which reports a day's snapshot asks
for, how the export file is read and landed, and the checks' verdicts on lakes written by hand.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import httpx
import pyarrow.parquet as pq
import pytest

from pipelines.clients.base import Connection
from pipelines.clients.datahub import Broadcast, DataHub
from pipelines.lake import Lake
from pipelines.pull.damaged import set_aside_damaged
from pipelines.pull.landing import Pull, Turn
from pipelines.pull.outcome import Landed
from pipelines.stream import Stream
from pipelines.streams.datahub import BROADCAST_REPORTS, BROADCASTS, CUSTOM_FIELDS, MEMBERS
from pipelines.streams.datahub import export as export_module
from pipelines.streams.datahub.checks import export_row_counts, report_coverage
from pipelines.streams.datahub.export import (
    EXPORT_COLUMNS,
    EXPORT_ROW_COUNT,
    ExportMismatch,
    land_member_export,
    member_batches,
)
from pipelines.streams.datahub.reports import (
    report_rows_by_day,
    report_window,
    reported_broadcasts,
)
from pipelines.transport import RetryPolicy, Transport, TruncatedBody

DAY = date(2026, 3, 31)
CONNECTION = Connection(name="default", base_url="http://hub", api_key="key")
SETTINGS = DataHub(connections=[CONNECTION])


def turn(stream: Stream, lake: Lake | None, transport: Transport, days=()) -> Turn:
    """One turn of the hub's connection over `transport`, on `DAY`."""
    pull = Pull(SETTINGS, lake, stream, print, print, list(days), clock=lambda: DAY)
    return Turn(pull, CONNECTION, transport, Landed())


def at(day: date, hour: int = 12) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


def service(handle) -> tuple[Transport, list[httpx.Request]]:
    """A transport to a fake data hub: `handle(request)` answers with JSON or a Response."""
    calls: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        body = handle(request)
        return body if isinstance(body, httpx.Response) else httpx.Response(200, json=body)

    transport = Transport(
        "http://hub",
        {"apikey": "key"},
        api_key="key",
        retry=RetryPolicy(attempts=1),
        http_transport=httpx.MockTransport(answer),
    )
    return transport, calls


# -- custom fields ------------------------------------------------------------------------


def test_custom_fields_list_archived_fields_with_their_options():
    gold = {"id": 10, "key": "gold", "name": "Gold", "colour": "amber"}
    fields = [
        {"id": 1, "key": "tier", "type": "single_select", "active": False, "options": [gold]},
        {"id": 2, "key": "note", "type": "text", "active": True, "options": None, "extra": "x"},
    ]
    transport, calls = service(lambda request: fields)

    rows = list(CUSTOM_FIELDS.rows(turn(CUSTOM_FIELDS, None, transport)))

    assert [(c.url.path, dict(c.url.params)) for c in calls] == [("/cdh/v1/custom-fields/", {})]
    assert rows[0]["active"] is False
    assert rows[0]["options"] == [
        {
            "id": 10,
            "key": "gold",
            "name": "Gold",
            "description": None,
            "position": None,
            "active": None,
        }
    ]
    assert rows[1]["options"] is None
    assert "extra" not in rows[1]


# -- broadcast reports --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "created", "has_snapshot", "window"),
    [
        # Scheduled as of the day: a zero report of that day alone.
        (DAY + timedelta(days=3), DAY - timedelta(days=1), False, (DAY, DAY)),
        # Not created yet on the day: not in that day's snapshot.
        (DAY + timedelta(days=3), DAY + timedelta(days=1), False, None),
        # Open: from the sent day to the day.
        (DAY - timedelta(days=10), DAY - timedelta(days=11), True, (DAY - timedelta(10), DAY)),
        # Last day of the 60-day window, both ends included.
        (DAY - timedelta(days=59), DAY - timedelta(days=60), True, (DAY - timedelta(59), DAY)),
        # Closed and in the lake: keeps its last snapshot.
        (DAY - timedelta(days=60), DAY - timedelta(days=61), True, None),
        # Closed, never snapshotted: its whole window, cut to 60 days.
        (
            DAY - timedelta(days=200),
            DAY - timedelta(days=201),
            False,
            (DAY - timedelta(200), DAY - timedelta(141)),
        ),
    ],
)
def test_report_window(sent, created, has_snapshot, window):
    broadcast = Broadcast(id=1, sent_date=at(sent), created_at=at(created))
    assert report_window(broadcast, DAY, has_snapshot) == window


def broadcast(broadcast_id: int, sent: date, created: date) -> dict:
    return {
        "id": broadcast_id,
        "sent_date": at(sent).isoformat(),
        "created_at": at(created).isoformat(),
    }


def report_answer(request: httpx.Request, listed: list[dict]):
    if request.url.path == "/v1/broadcasts":
        return listed
    return {"sent": 5, "open_count": 3, "clicks": 1, "segment_name": "all", "ctr": 0.2}


def snapshot(lake: Lake, day: date, broadcast_ids: list[int]) -> None:
    rows = [
        dict.fromkeys(BROADCAST_REPORTS.schema.names) | {"broadcast_id": b, "connection": "default"}
        for b in broadcast_ids
    ]
    lake.write(BROADCAST_REPORTS, "default", rows, day=day)


def test_reports_are_asked_for_open_broadcasts_and_those_not_in_the_lake(tmp_path):
    lake = Lake(tmp_path)
    earlier, first, second = DAY - timedelta(days=5), DAY - timedelta(days=1), DAY
    listed = [
        broadcast(1, DAY - timedelta(days=10), DAY - timedelta(days=11)),  # open
        broadcast(2, DAY - timedelta(days=100), DAY - timedelta(days=101)),  # closed, in lake
        broadcast(3, DAY - timedelta(days=200), DAY - timedelta(days=201)),  # closed, not
        broadcast(4, DAY + timedelta(days=3), DAY - timedelta(days=1)),  # scheduled
        broadcast(5, DAY + timedelta(days=3), DAY),  # created on the second day
        # Closed, its only snapshot on a day being rewritten: taken again.
        broadcast(6, DAY - timedelta(days=90), DAY - timedelta(days=91)),
    ]
    snapshot(lake, earlier, [1, 2])
    snapshot(lake, first, [6])
    transport, calls = service(lambda request: report_answer(request, listed))

    by_day = dict(report_rows_by_day(turn(BROADCAST_REPORTS, lake, transport, [first, second])))

    asked = [
        (c.url.path, c.url.params.get("start_date"), c.url.params.get("end_date")) for c in calls
    ]
    sent = {b["id"]: datetime.fromisoformat(b["sent_date"]).date() for b in listed}
    report = "/v1/broadcasts/{}/report"
    assert asked == [
        ("/v1/broadcasts", None, None),
        # First day: the open one, the closed one never snapshotted (its first 60 days, once),
        # the scheduled one (a zero report of the day), and the one being rewritten.
        (report.format(1), str(sent[1]), str(first)),
        (report.format(3), str(sent[3]), str(sent[3] + timedelta(days=59))),
        (report.format(4), str(first), str(first)),
        (report.format(6), str(sent[6]), str(sent[6] + timedelta(days=59))),
        # Second day: only what can still change, and the broadcast created that day.
        (report.format(1), str(sent[1]), str(second)),
        (report.format(4), str(second), str(second)),
        (report.format(5), str(second), str(second)),
    ]
    assert [row["broadcast_id"] for row in by_day[first]] == [1, 3, 4, 6]
    assert [row["broadcast_id"] for row in by_day[second]] == [1, 4, 5]
    row = by_day[second][0]
    assert (row["start_date"], row["end_date"]) == (sent[1], second)
    assert (row["sent"], row["open_count"], row["clicks"]) == (5, 3, 1)
    assert json.loads(row["report"]) == {"ctr": 0.2}


def test_a_snapshot_file_is_read_once_for_its_broadcasts(tmp_path, monkeypatch):
    """Which broadcasts the lake has a snapshot of is read from each day file once, then
    kept with its footer: a sync reads the files written since, not every day's, and the
    damaged-file look over the stream's one-day window does not forget them."""
    lake = Lake(tmp_path)
    days = [DAY - timedelta(days=n) for n in range(5)]
    for n, day in enumerate(days):
        snapshot(lake, day, [n, n + 10])
    read = []
    read_table = Lake.read_table
    monkeypatch.setattr(
        Lake,
        "read_table",
        lambda self, path, columns=None: read.append(path) or read_table(self, path, columns),
    )
    reported = {n for pair in ((n, n + 10) for n in range(5)) for n in pair}

    assert reported_broadcasts(lake, "default", [DAY]) == reported - {0, 10}
    first = [path for path in read if "/_footers/" not in path]
    assert len(first) == len(days)
    set_aside_damaged(lake, BROADCAST_REPORTS, [DAY])
    snapshot(lake, DAY + timedelta(days=1), [99])
    read.clear()

    assert reported_broadcasts(lake, "default", []) == reported | {99}
    assert [path for path in read if "/_footers/" not in path] == [
        lake.path(BROADCAST_REPORTS, "default", DAY + timedelta(days=1))
    ]


# -- members export -----------------------------------------------------------------------


def export_csv(rows: list[dict], header: list[str] | None = None) -> bytes:
    header = header or ["member_id", *EXPORT_COLUMNS[1:], "not_in_schema"]
    lines = [",".join(header)]
    lines += [",".join(str(row.get(name, "")) for name in header) for row in rows]
    return ("\ufeff" + "\r\n".join(lines) + "\r\n").encode()


def in_chunks(content: bytes, size: int = 7):
    return iter([content[i : i + size] for i in range(0, len(content), size)])


def test_member_batches_read_columns_by_header_in_batches(monkeypatch):
    monkeypatch.setattr(export_module, "EXPORT_BATCH_ROWS", 2)
    # Columns in another order than the schema's, one the schema does not know.
    header = ["not_in_schema", *reversed(EXPORT_COLUMNS)]
    rows = [
        {"member_id": n, "full_name": f"Member {n}", "not_in_schema": "x", "city": ""}
        for n in (1, 2, 3)
    ]

    tables = list(member_batches(in_chunks(export_csv(rows, header)), "jp"))

    assert [t.num_rows for t in tables] == [2, 1]
    assert all(t.schema.equals(MEMBERS.schema) for t in tables)
    first = tables[0].to_pylist()[0]
    assert first["member_id"] == 1 and first["full_name"] == "Member 1"
    assert first["connection"] == "jp"
    assert first["city"] is None  # empty is null
    # A column the schema does not know is kept in `_extra`, as text (a file has no types).
    assert json.loads(first["_extra"]) == {"new": {"not_in_schema": "x"}}


def test_member_batches_keep_what_the_schema_does_not_hold():
    """A column the file lacks is null and named; a value that is not its column's type is
    null and kept as sent; neither fails the export (pipelines/lake/drift.py)."""
    header = [name for name in EXPORT_COLUMNS if name != "city"]
    rows = [{"member_id": 1, "full_name": "A"}, {"member_id": "n/a", "full_name": "B"}]

    [table] = member_batches(in_chunks(export_csv(rows, header)), "jp")

    assert table["member_id"].to_pylist() == [1, None]
    assert table["full_name"].to_pylist() == ["A", "B"]
    assert table["city"].to_pylist() == [None, None]
    assert [json.loads(e) for e in table["_extra"].to_pylist()] == [
        {"missing": ["city"]},
        {"retyped": {"member_id": "n/a"}, "missing": ["city"]},
    ]


@pytest.mark.parametrize(
    ("content", "error", "message"),
    [
        (b"", TruncatedBody, "empty, without its header"),
        # A cut body: its last line short of fields.
        (",".join(EXPORT_COLUMNS).encode() + b"\r\n1,Member 1", TruncatedBody, "line 2 has 2"),
    ],
)
def test_member_batches_refuse_a_file_without_its_header_or_cut(content, error, message):
    with pytest.raises(error, match=message):
        list(member_batches(in_chunks(content), "default"))


def test_member_batches_read_long_fields_and_odd_bytes():
    """A field over 131,072 characters (the csv module's default limit) failed the export,
    as did a byte that is not UTF-8; U+FFFD (what a lone surrogate is served as) is text."""
    address = "Long Street " * 20_000
    content = export_csv(
        [
            {"member_id": 1, "address": address},
            {"member_id": 2, "full_name": "odd \ufffd served"},
            {"member_id": 3, "full_name": "placeholder"},
        ]
    ).replace(b"placeholder", b"odd \xff byte")

    [table] = member_batches(in_chunks(content, 4096), "default")

    assert table["address"].to_pylist()[0] == address
    assert table["full_name"].to_pylist()[1:] == ["odd \ufffd served", "odd \ufffd byte"]


def export_service(rows: list[dict], row_count: int):
    """Start answers a pending task, the next look a finished one, then the file."""

    def handle(request: httpx.Request):
        if request.url.path == "/v1/members/export":
            return {"id": 9, "category": "export_member", "status": "pending"}
        if request.url.path == "/task/9":
            result = {"row_count": row_count, "download_url": "http://elsewhere/file"}
            return {"id": 9, "category": "export_member", "status": "success", "result": result}
        assert request.url.path == "/v1/members/export/9/file"
        return httpx.Response(200, content=export_csv(rows))

    return service(handle)


@pytest.fixture
def clock(monkeypatch):
    """The export's stamp, fixed (its day is the turn's clock's, `DAY`)."""
    monkeypatch.setattr(export_module, "pulled_at", lambda: "moment")


def test_member_export_lands_with_what_its_task_announced(tmp_path, clock):
    lake = Lake(tmp_path)
    transport, calls = export_service([{"member_id": 1}, {"member_id": 2}], row_count=2)

    landed = land_member_export(turn(MEMBERS, lake, transport))

    assert landed == 2
    assert [(c.method, c.url.path) for c in calls] == [
        ("POST", "/v1/members/export"),
        ("GET", "/task/9"),
        ("GET", "/v1/members/export/9/file"),
    ]
    path = lake.path(MEMBERS, "default", DAY)
    assert pq.read_table(path)["member_id"].to_pylist() == [1, 2]
    assert lake.read_metadata(path) == {
        "pulled_at": "moment",
        "export_task_id": "9",
        EXPORT_ROW_COUNT: "2",
    }


def test_member_export_that_misses_announced_rows_does_not_land(tmp_path, clock):
    lake = Lake(tmp_path)
    transport, _ = export_service([{"member_id": 1}], row_count=2)

    with pytest.raises(ExportMismatch, match="held 1 rows, the task announced row_count 2"):
        land_member_export(turn(MEMBERS, lake, transport))

    assert lake.files(MEMBERS) == []


# -- checks -------------------------------------------------------------------------------


def land_members(lake: Lake, connection: str, day: date, rows: int, announced: str | None):
    members = [
        dict.fromkeys(MEMBERS.schema.names) | {"member_id": n, "connection": connection}
        for n in range(rows)
    ]
    metadata = {EXPORT_ROW_COUNT: announced} if announced is not None else {}
    lake.write(MEMBERS, connection, members, day=day, metadata=metadata)


def test_export_row_counts_pass_when_each_latest_file_holds_its_rows(tmp_path):
    lake = Lake(tmp_path)
    # An older file that disagreed is history: only the latest of each connection counts.
    land_members(lake, "default", DAY - timedelta(days=1), 1, "3")
    land_members(lake, "default", DAY, 2, "2")
    land_members(lake, "jp", DAY, 1, "1")

    counts = export_row_counts(lake)

    assert counts.passed
    assert counts.landed == counts.announced == {"default": 2, "jp": 1}


def test_export_row_counts_fail_on_a_file_that_disagrees(tmp_path):
    lake = Lake(tmp_path)
    land_members(lake, "default", DAY, 1, "1")
    land_members(lake, "jp", DAY, 1, "2")

    counts = export_row_counts(lake)

    assert not counts.passed
    assert counts.landed == {"default": 1, "jp": 1}
    assert counts.announced == {"default": 1, "jp": 2}


def test_export_row_counts_leave_out_a_file_that_does_not_say(tmp_path):
    lake = Lake(tmp_path)
    land_members(lake, "default", DAY, 1, "1")
    land_members(lake, "jp", DAY, 3, None)

    counts = export_row_counts(lake)

    assert counts.landed == counts.announced == {"default": 1}
    assert counts.not_announced == ["jp"]


#: When the hand-written files were pulled: the broadcasts at LISTED, reports before or after.
BEFORE, LISTED, AFTER = (
    "2026-03-31T09:00:00+00:00",
    "2026-03-31T10:00:00+00:00",
    "2026-03-31T11:00:00+00:00",
)


def land_broadcasts(lake: Lake, connection: str, ids: list[int], at: str = LISTED) -> None:
    rows = [
        dict.fromkeys(BROADCASTS.schema.names) | {"id": i, "connection": connection} for i in ids
    ]
    lake.write(BROADCASTS, connection, rows, metadata={"pulled_at": at})


def land_reports(lake: Lake, connection: str, day: date, ids: list[int], at: str = AFTER) -> None:
    rows = [
        dict.fromkeys(BROADCAST_REPORTS.schema.names)
        | {"broadcast_id": i, "connection": connection}
        for i in ids
    ]
    lake.write(BROADCAST_REPORTS, connection, rows, day=day, metadata={"pulled_at": at})


def test_report_coverage_passes_when_every_broadcast_has_a_report(tmp_path):
    lake = Lake(tmp_path)
    land_broadcasts(lake, "default", [1, 2, 3])
    land_broadcasts(lake, "jp", [1])
    # A closed broadcast's report stays on the day it was taken.
    land_reports(lake, "default", DAY - timedelta(days=1), [1, 2], at=BEFORE)
    land_reports(lake, "default", DAY, [1, 3])
    land_reports(lake, "jp", DAY, [1])

    coverage = report_coverage(lake)

    assert coverage.passed
    assert coverage.missing == {"default": 0, "jp": 0}
    # Reports pulled after the list may be of broadcasts created since: not compared.
    assert coverage.unknown == {"default": 0}
    assert coverage.not_compared == {
        "jp": ["reports of unknown broadcasts: every report was pulled after the list"]
    }


def test_report_coverage_counts_missing_and_unknown_per_connection(tmp_path):
    lake = Lake(tmp_path)
    land_broadcasts(lake, "default", [1, 2, 3])
    land_broadcasts(lake, "jp", [1])
    land_reports(lake, "default", DAY, [1])
    # Another connection's broadcast of the same id is not this one's; pulled before the
    # list, these reports must be of listed broadcasts.
    land_reports(lake, "jp", DAY, [1, 2, 3], at=BEFORE)

    coverage = report_coverage(lake)

    assert not coverage.passed
    assert coverage.missing == {"default": 2}
    assert coverage.unknown == {"jp": 2}


def test_report_coverage_expects_no_report_of_a_day_before_the_broadcast(tmp_path):
    """A day's snapshot leaves out broadcasts created after it: a backfill of older days
    does not miss them."""
    lake = Lake(tmp_path)
    created = datetime(2026, 4, 2, tzinfo=UTC)
    rows = [
        dict.fromkeys(BROADCASTS.schema.names) | {"id": 1, "connection": "default"},
        dict.fromkeys(BROADCASTS.schema.names)
        | {"id": 2, "connection": "default", "created_at": created},
    ]
    lake.write(BROADCASTS, "default", rows, metadata={"pulled_at": LISTED})
    land_reports(lake, "default", DAY, [1])

    assert report_coverage(lake).missing == {"default": 0}
    land_reports(lake, "default", created.date(), [1])
    assert report_coverage(lake).missing == {"default": 1}
