"""The conversation pipeline against the real sandbox: both regions land exactly its truth."""

from __future__ import annotations

import csv
import io
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import pytest

from assets.conversation import ASSETS, CHECKS
from pipelines.agent.compaction import STREAMS as AGENT_STREAMS
from pipelines.clients.conversation import ConversationService
from pipelines.lake import Lake
from pipelines.pull.landing import today
from pipelines.streams.conversation import MESSAGES, STREAMS, backups
from pipelines.streams.conversation.backups import BACKUP_FIELDS, land_backup
from pipelines.streams.conversation.checks import rows_match_backup
from pipelines.streams.pushed import STREAMS as PUSH_STREAMS
from pipelines.warehouse import SQL_DIR, Warehouse
from sandbox.faults import FaultSpec
from tests.conftest import HISTORY_DAYS
from tests.figures import run_figures
from tests.pipelines.conftest import APIKEY

REGIONS = ("default", "jp")
#: The column each stream's truth ids are compared with.
#: Each pulled stream's id within its region, its key's last column (a member's `id` within
#: its channel): every stream the service declares is compared with the sandbox's truth.
ID_COLUMNS = {stream.name: stream.key[-1] for stream in STREAMS}
DIRECTORY = ("channels", "teams", "users")


def first_day() -> date:
    """The first day of the sandboxes' history (tests/conftest.py), whose anchor is now: of
    the day a test runs on, not the day the suite started (a suite may cross a midnight)."""
    return today() - timedelta(days=HISTORY_DAYS)


teams, messages, members, assignments = (
    ASSETS[name] for name in ("teams", "messages", "members", "assignments")
)


def _materialize(resources: dict, selection=None, first=None, last=None):
    return dg.materialize(
        list(selection or (*ASSETS.values(), *CHECKS)),
        resources=resources,
        tags={
            "dagster/asset_partition_range_start": (first or first_day()).isoformat(),
            "dagster/asset_partition_range_end": (last or today()).isoformat(),
        },
        raise_on_error=False,
    )


def _failure_text(result: dg.ExecuteInProcessResult) -> str:
    return "\n".join(
        event.step_failure_data.error.to_string()
        for event in result.all_events
        if event.is_step_failure
    )


def _warehouse(resources: dict, tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """The conversation views over the lake, opened read-only as an analyst would."""
    sql_dir = tmp_path / "sql"
    sql_dir.mkdir(exist_ok=True)
    if not (sql_dir / "conversation").exists():
        (sql_dir / "conversation").symlink_to(SQL_DIR / "conversation")
    lake = resources["lake"]
    # The folder holds the agent's views too (their handovers read the push's ledger): their
    # streams are named.
    streams = [*STREAMS, *AGENT_STREAMS, *PUSH_STREAMS]
    warehouse = Warehouse(lake.warehouse_path, lake.lake(), streams, sql_dir=sql_dir)
    warehouse.refresh()
    return duckdb.connect(lake.warehouse_path, read_only=True)


def _landed(con: duckdb.DuckDBPyConnection) -> dict:
    """{region: {stream: sorted ids}}: sorted lists, so a duplicate shows."""
    landed: dict = {region: {} for region in REGIONS}
    for stream, column in ID_COLUMNS.items():
        for region in REGIONS:
            rows = con.execute(
                f"SELECT {column} FROM conversation.{stream} WHERE connection = ?", [region]
            ).fetchall()
            landed[region][stream] = sorted(row[0] for row in rows)
    return landed


def _truth(sandbox) -> dict:
    counts = sandbox.truth()["conversation"]
    truth: dict = {region: {} for region in REGIONS}
    for region in REGIONS:
        for stream in ID_COLUMNS:
            ids = sorted(sandbox.truth_ids("conversation", region, stream))
            assert len(ids) == counts[region][stream]
            truth[region][stream] = ids
    return truth


def _checks_passed(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {
        f"{'/'.join(e.asset_key.path)}:{e.check_name}": e.passed
        for e in result.get_asset_check_evaluations()
    }


def _backup_metadata(result: dg.ExecuteInProcessResult) -> dict:
    return run_figures(result)["messages"]


def _direct_backup(sandbox, region: str, first: date) -> list[dict]:
    """The backup of `first` to the end of today, fetched by hand and read by `csv`."""
    tomorrow = today() + timedelta(days=1)
    window = {"started_at": f"{first}T00:00:00+00:00", "ended_at": f"{tomorrow}T00:00:00Z"}
    base = f"{sandbox.url}/conversation-jp" if region == "jp" else f"{sandbox.url}/conversation"
    with httpx.Client(base_url=base, headers={"apikey": APIKEY}, timeout=30) as http:
        backup_id = http.post("/v1/backups/messages", json=window).json()["backup_id"]
        while http.get(f"/v1/backups/{backup_id}").json()["state"] != "completed":
            time.sleep(0.05)
        file = http.get(f"/v1/backups/{backup_id}/download").content.decode("utf-8")
    return list(csv.DictReader(io.StringIO(file, newline="")))


def _assert_messages_equal_a_direct_backup(sandbox, con, region: str) -> None:
    """Commas, quotes, line breaks and Japanese survive the CSV: the landed messages equal,
    field by field, the same window's backup read by Python's csv module; each sits in the
    partition of its UTC day."""
    columns = ["message_uuid", "conversation_id", "sender_type", "sender_id", "text", "url"]
    expected = sorted(
        (
            row["message_uuid"],
            int(row["conversation_id"]),
            row["sender_type"],
            int(row["sender_id"]),
            row["text"],
            row["url"] or None,
        )
        for row in _direct_backup(sandbox, region, first_day())
    )
    landed = con.execute(
        f"SELECT {', '.join(columns)} FROM conversation.messages WHERE connection = ? ORDER BY 1",
        [region],
    ).fetchall()
    assert landed == expected
    assert any("\n" in text and '"' in text for *_, text, _ in landed)
    assert any("\u3040" <= ch <= "\u30ff" for *_, text, _ in landed for ch in text)
    [(elsewhere,)] = con.execute(
        "SELECT count(*) FROM conversation.messages WHERE timezone('UTC', timestamp)::DATE <> date"
    ).fetchall()
    assert elsewhere == 0


def test_the_history_lands_exactly_in_one_backup_per_region_and_reruns_replace(
    frozen_sandbox, sync_env, tmp_path
):
    resources = sync_env(frozen_sandbox)
    truth = _truth(frozen_sandbox)

    first = _materialize(resources)
    assert first.success, _failure_text(first)
    checks = _checks_passed(first)
    assert len(checks) == len(CHECKS) and all(checks.values()), checks
    metadata = _backup_metadata(first)
    assert metadata["days"] == HISTORY_DAYS + 1
    assert len(metadata["backup_ids"]) == 2  # the whole range in one backup per region
    assert metadata["rows_per_connection"] == metadata["backup_rows_per_connection"]
    assert metadata["rows"] == sum(len(truth[r]["messages"]) for r in REGIONS)
    with _warehouse(resources, tmp_path) as con:
        assert _landed(con) == truth
        _assert_messages_equal_a_direct_backup(frozen_sandbox, con, "jp")
    lake = Lake(resources["lake"].lake_root)
    files = lake.files(MESSAGES)
    assert len(files) == 2 * (HISTORY_DAYS + 1)  # every day, per region, empty ones included

    again = _materialize(resources)
    assert again.success, _failure_text(again)
    assert all(_checks_passed(again).values())
    assert lake.files(MESSAGES) == files
    with _warehouse(resources, tmp_path) as con:
        assert _landed(con) == truth


def _metadata(result: dg.ExecuteInProcessResult, node: str) -> dict:
    return run_figures(result)[node.split("__")[-1]]


def test_members_are_looked_up_again_only_for_new_messages(start_sandbox, sync_env, tmp_path):
    """A sync with no new messages rewrites no message day and looks up no member; after new
    messages, only the members in the days that changed are looked up, and the result still
    equals the truth."""
    # Live, one message every 5 minutes per region: none arrives on its own during the test,
    # two do when the clock is moved 10 minutes. Anchored 20 minutes back, so the moved clock
    # stays within the pipeline's yesterday and today whatever the hour.
    sandbox = start_sandbox(
        frozen=False,
        now=datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=20),
        arrivals_per_minute=0.2,
    )
    # The rotation off: what is looked up here is for the messages alone
    # (tests/pipelines/test_members_current.py has the rotation).
    resources = sync_env(sandbox, sync_toml="[service.conversation]\nmember_refresh_pulls = 0\n")
    selection = [messages, members, assignments]
    full = _materialize(resources, selection)
    assert full.success, _failure_text(full)
    everyone = _metadata(full, "conversation__members")["looked_up"]

    recent = today() - timedelta(days=1)
    quiet = _materialize(resources, selection, first=recent)
    assert quiet.success, _failure_text(quiet)
    assert _metadata(quiet, "conversation__messages")["unchanged_days"] == 2 * len(REGIONS)
    for node in ("conversation__members", "conversation__assignments"):
        figures = _metadata(quiet, node)
        assert figures["looked_up"] == {region: 0 for region in REGIONS}
        assert figures["requests"] == 0
        assert figures["kept_from_last_snapshot"] == figures["rows_per_connection"]

    sandbox.app.sandbox.clock.advance(600)  # new messages in both regions
    busy = _materialize(resources, selection, first=recent)
    assert busy.success, _failure_text(busy)
    looked_up = _metadata(busy, "conversation__members")["looked_up"]
    truth = _truth(sandbox)
    with _warehouse(resources, tmp_path) as con:
        landed = _landed(con)
        for region in REGIONS:
            # The history lies well within the 365 days the service serves: none has aged out.
            for stream in ("messages", "members", "assignments"):
                assert landed[region][stream] == truth[region][stream], stream
            [(in_recent_days,)] = con.execute(
                "SELECT count(DISTINCT (channel_id, member_id)) FROM conversation.messages "
                "WHERE connection = ? AND date >= ?",
                [region, recent],
            ).fetchall()
            assert 0 < looked_up[region] <= in_recent_days < everyone[region]


def test_a_backup_past_its_deadline_fails_saying_so(start_sandbox, sync_env):
    sandbox = start_sandbox(task_phase_seconds=600)  # the backup stays `initiated`
    resources = sync_env(
        sandbox, pace=True, sync_toml="[service.conversation]\nbackup_deadline_seconds = 0.5\n"
    )
    result = _materialize(resources, selection=[messages], first=today())
    assert not result.success
    error = _failure_text(result)
    assert "(state 'initiated', waiting for 'completed'" in error
    assert "the next run tries again" in error
    assert "deadline of 0.5 s" in error
    assert APIKEY not in error


def test_faults_leave_the_result_exact(start_sandbox, sync_env, tmp_path):
    """A month under 10% 5xx, 5% 429, 5% truncated and 5% dropped answers lands exactly what
    the service held before the faults were turned on. (A month, not the year, keeps the
    file's runtime: retries of ~1000 member lookups per region would dominate it.)"""
    sandbox = start_sandbox()
    first = today() - timedelta(days=29)
    expected: dict = {}
    for region in REGIONS:
        backup = _direct_backup(sandbox, region, first)
        seen = sorted({int(row["member_id"]) for row in backup})
        expected[region] = {
            **{s: sorted(sandbox.truth_ids("conversation", region, s)) for s in DIRECTORY},
            "messages": sorted(row["message_uuid"] for row in backup),
            "members": seen,
            "assignments": seen,
        }
    faults = FaultSpec(error=0.1, rate=0.05, truncate=0.05, drop=0.05)
    httpx.put(f"{sandbox.url}/_sandbox/faults", json=faults.as_dict()).raise_for_status()
    # Lookups spend most of their time waiting out backoffs: more of them in flight.
    resources = sync_env(
        sandbox, pace=True, sync_toml="[service.conversation]\nmember_workers = 32\n"
    )

    result = _materialize(resources, first=first)
    assert result.success, _failure_text(result)
    assert all(_checks_passed(result).values())
    [looked_up] = result.asset_materializations_for_node("conversation__members")
    assert looked_up.metadata["retries"].value > 0  # the faults did reach the pipeline
    with _warehouse(resources, tmp_path) as con:
        assert _landed(con) == expected


def test_a_path_from_sync_toml_is_the_one_called(frozen_sandbox, sync_env):
    resources = sync_env(
        frozen_sandbox, sync_toml='[paths.conversation]\nlist_teams = "/v9/teams"\n'
    )
    result = _materialize(resources, selection=[teams])
    assert not result.success
    assert "GET /v9/teams answered 404" in _failure_text(result)


def test_an_unknown_operation_in_the_path_table_is_refused():
    refused = r"unknown operations \[.list_team.\] \(did you mean \"list_teams\"\?\)"
    with pytest.raises(ValueError, match=refused):
        ConversationService(connections=[], paths={"list_team": "/v2/teams"})


def test_a_member_the_service_no_longer_knows_is_skipped_and_flagged(frozen_sandbox, sync_env):
    resources = sync_env(frozen_sandbox)
    day = today() - timedelta(days=1)
    landed = _materialize(resources, selection=[messages], first=day, last=day)
    assert landed.success, _failure_text(landed)
    lake = Lake(resources["lake"].lake_root)
    [(seen,)] = duckdb.sql(
        f"SELECT count(DISTINCT member_id) FROM read_parquet('{lake.path(MESSAGES, 'jp', day)}')"
    ).fetchall()
    assert seen > 0
    ghost = {
        "message_uuid": "00000000-0000-4000-8000-000000000000",
        "channel_id": 1,
        "member_id": 1,
        "sender_type": "member",
        "message_type": "text",
        "text": "hello",
    }
    lake.write(MESSAGES, "jp", [ghost], day=day - timedelta(days=1))

    member_checks = [
        check
        for check in CHECKS
        if {key.asset_key for key in check.check_keys} & {members.key, assignments.key}
    ]
    result = _materialize(resources, selection=[members, assignments, *member_checks])
    assert result.success, _failure_text(result)
    for node in ("conversation__members", "conversation__assignments"):
        metadata = result.asset_materializations_for_node(node)[0].metadata
        assert metadata["rows_per_connection"].value["jp"] == seen
        assert metadata["not_found"].value == {"default": 0, "jp": 1}
    checks = _checks_passed(result)
    assert checks["conversation/members:matches_members_in_messages"] is False
    assert checks["conversation/assignments:matches_members_in_messages"] is False


def _csv(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue().encode()


HEADER = [field.name for field in BACKUP_FIELDS]


def _message(uuid: str, text: str, stamp: str, url: str = "") -> list[str]:
    return [uuid, "7", "3", "11", "member", "11", "text", text, url, "", stamp]


def test_the_csv_is_read_across_any_chunk_boundaries(tmp_path):
    """Quotes, CRLF inside a text and multi-byte characters cut between chunks; days split."""
    body = _csv(
        [
            HEADER,
            _message("a", 'say "hi",\r\nthen\nbye', "2026-01-01T23:59:59+00:00"),
            _message("b", "返品したい", "2026-01-02T00:00:00+00:00", url="https://x/y.png"),
            _message("c", "", "2026-01-02T10:00:00+00:00"),
        ]
    )
    chunks = [body[i : i + 3] for i in range(0, len(body), 3)]
    lake = Lake(tmp_path)
    days = [date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 3)]
    landed = land_backup(lake, "default", days, chunks)
    assert landed.file_rows == 3 and landed.rows == 3
    assert landed.rows_per_day == {days[0]: 1, days[1]: 2, days[2]: 0}
    rows = duckdb.sql(
        f"SELECT message_uuid, text, url, connection FROM read_parquet('{tmp_path}/**/*.parquet') "
        "ORDER BY 1"
    ).fetchall()
    assert rows == [
        ("a", 'say "hi",\r\nthen\nbye', None, "default"),
        ("b", "返品したい", "https://x/y.png", "default"),
        ("c", "", None, "default"),
    ]


def test_a_backup_file_out_of_order_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(backups, "CSV_BLOCK_BYTES", 200)  # one row per block
    text = "x" * 120
    body = _csv(
        [
            HEADER,
            _message("a", text, "2026-01-02T00:00:00+00:00"),
            _message("b", text, "2026-01-01T00:00:00+00:00"),
            _message("c", text, "2026-01-02T00:00:01+00:00"),
        ]
    )
    with pytest.raises(ValueError, match="not oldest first: 2026-01-02 came back"):
        land_backup(Lake(tmp_path), "default", [date(2026, 1, 1), date(2026, 1, 2)], [body])


def test_odd_bytes_in_a_backup_read_as_the_replacement_character(tmp_path):
    """A byte that is not UTF-8 failed the region's whole backup; U+FFFD (what a lone
    surrogate is served as) is text."""
    body = _csv(
        [
            HEADER,
            _message("a", "odd \ufffd served", "2026-01-01T10:00:00+00:00"),
            _message("b", "placeholder", "2026-01-01T11:00:00+00:00"),
            _message("c", "plain", "2026-01-01T12:00:00+00:00"),
        ]
    ).replace(b"placeholder", b"odd \xed\xa0\x80 bytes")
    landed = land_backup(Lake(tmp_path), "default", [date(2026, 1, 1)], [body])
    assert landed.rows == landed.file_rows == 3
    texts = duckdb.sql(
        f"SELECT text FROM read_parquet('{tmp_path}/**/*.parquet') ORDER BY message_uuid"
    ).fetchall()
    assert texts == [("odd \ufffd served",), ("odd \ufffd\ufffd\ufffd bytes",), ("plain",)]


def test_a_record_longer_than_a_block_is_refused_naming_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(backups, "CSV_BLOCK_BYTES", 200)
    body = _csv([HEADER, _message("a", "x" * 500, "2026-01-01T10:00:00+00:00")])
    with pytest.raises(backups.BackupRecordTooLong, match="longer than 200 bytes"):
        land_backup(Lake(tmp_path), "default", [date(2026, 1, 1)], [body])


def test_rows_match_backup_compares_each_region_over_the_range(tmp_path):
    lake = Lake(tmp_path)
    days = [date(2026, 1, 1), date(2026, 1, 2)]
    body = _csv(
        [
            HEADER,
            _message("a", "x", "2026-01-01T10:00:00+00:00"),
            _message("b", "y", "2026-01-02T10:00:00+00:00"),
        ]
    )
    land_backup(lake, "default", days, [body])
    landed_ns = time.time_ns()
    verdict = rows_match_backup(
        lake, ["default", "jp"], *days, {"default": 2, "jp": 0}, materialized_ns=landed_ns
    )
    assert verdict.passed
    assert verdict.figures == {
        "rows_in_lake": {"default": 2, "jp": 0},
        "backup_rows": {"default": 2, "jp": 0},
        "first_day": "2026-01-01",
        "not_compared": {},
    }
    # A day of the range lost from the lake: its rows no longer add up.
    lake.drop(MESSAGES, "default", days[1])
    lost = rows_match_backup(lake, ["default"], *days, {"default": 2}, materialized_ns=landed_ns)
    assert not lost.passed
    assert lost.nothing_compared is None


def test_rows_match_backup_leaves_out_a_region_landed_again_since(tmp_path):
    """A later run's backup replaced a day: its rows are that backup's, not the one the
    materialization recorded, so the region is not compared (and nothing compared is not
    a pass)."""
    lake = Lake(tmp_path)
    day = date(2026, 1, 1)
    body = _csv([HEADER, _message("a", "x", "2026-01-01T10:00:00+00:00")])
    land_backup(lake, "default", [day], [body])
    before_ns = lake.modified_ns(lake.path(MESSAGES, "default", day)) - 1
    verdict = rows_match_backup(lake, ["default"], day, day, {"default": 5}, before_ns)
    assert not verdict.passed
    assert verdict.nothing_compared == "default: landed again since the backup"
