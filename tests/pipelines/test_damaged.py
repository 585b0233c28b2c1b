"""Damaged lake files (pipelines/pull/damaged.py): found when read, moved aside with their reason,
said so, and landed again; the warehouse keeps opening meanwhile."""

import os
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from assets.checks import files_readable_check
from assets.factory import asset_key
from assets.resources import resources_or_problem
from cli.main import main
from pipelines.lake import Lake, file_day
from pipelines.pull.damaged import (
    FOLDER,
    REASON_SUFFIX,
    damaged_of,
    missing,
    set_aside_damaged,
    unreadable,
)
from pipelines.pull.landing import today
from pipelines.streams.comment import ACCOUNTS, TRIGGER_LOGS
from pipelines.warehouse.relations import damaged_note
from tests.pipelines.test_comment import workspace_id

STREAMS = ["trigger_logs", "accounts"]
#: Days back from today that a sync lands where a test needs some files, not the history.
RECENT_DAYS = 10


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:  # not Parquet at all
        path.write_text("this is not a parquet file\n" * 40)


def landed_days(lake: Lake) -> dict[str, int]:
    with lake.connect() as con:
        rows = con.execute(
            f"SELECT date::VARCHAR, count(*) FROM {lake.relation(TRIGGER_LOGS)} GROUP BY ALL"
        ).fetchall()
    return {day: count for day, count in rows if count}


@pytest.mark.parametrize("how", ["truncated", "empty", "not_parquet"])
def test_a_damaged_day_and_snapshot_are_set_aside_and_landed_again_by_the_same_sync(
    frozen_sandbox, sync_env, capsys, how
):
    """Regression: every later sync exited 1 naming the file until someone deleted it."""
    sync_env(frozen_sandbox)
    assert main(["sync", "--streams", *STREAMS]) == 0
    lake = Lake(os.environ["LAKE_ROOT"])
    day_files = [p for p in lake.files(TRIGGER_LOGS) if lake.footer(p).num_rows]
    day_file, snapshot = Path(day_files[len(day_files) // 2]), Path(lake.files(ACCOUNTS)[0])
    damage(day_file, how)
    damage(snapshot, how)
    capsys.readouterr()

    assert main(["sync", "--streams", *STREAMS]) == 0
    out = capsys.readouterr().out
    assert f"damaged file set aside: {day_file}" in out  # the run's own words, naming it
    truth = frozen_sandbox.truth_days("comment", workspace_id(frozen_sandbox), "trigger_logs")
    assert landed_days(lake) == {day: count for day, count in truth.items() if count}
    assert lake.footer(str(snapshot)).num_rows > 0  # the snapshot landed again too

    for stream, path in ((TRIGGER_LOGS, day_file), (ACCOUNTS, snapshot)):
        [kept] = damaged_of(lake, stream)
        relative = path.relative_to(lake.root)
        assert kept.startswith(f"{lake.root}/{FOLDER}/{relative}.")
        reason = Path(kept + REASON_SUFFIX).read_text()
        assert str(path) in reason and len(reason.splitlines()) == 3
        check = files_readable_check(stream, asset_key(stream))
        result = check(dg.build_asset_check_context(), lake=resources_or_problem()["lake"])
        assert not result.passed and kept in result.description


@pytest.mark.parametrize("rebuild_due", [True, False])
def test_the_warehouse_keeps_opening_with_a_damaged_file_and_sets_it_aside(
    frozen_sandbox, sync_env, capsys, rebuild_due
):
    """A rebuild of the views reads every footer, and the row counts after it read them
    again; a damaged file stops neither."""
    sync_env(frozen_sandbox)
    # The last days only: what the warehouse reads is the same for every day's file.
    first = today() - timedelta(days=RECENT_DAYS)
    assert main(["sync", "--streams", *STREAMS, "--start", first.isoformat()]) == 0
    lake = Lake(os.environ["LAKE_ROOT"])
    damaged = Path(lake.files(TRIGGER_LOGS)[-1])
    damage(damaged, "truncated")
    if rebuild_due:
        Path(os.environ["WAREHOUSE_PATH"]).unlink()
    capsys.readouterr()

    assert main(["warehouse"]) == 0
    out = capsys.readouterr().out
    assert "damaged file(s) set aside" in out and str(damaged) in out
    assert damaged_of(lake, TRIGGER_LOGS)
    assert "comment.trigger_logs" in out and "row counts not shown" not in out


def test_a_sync_reads_again_only_the_footers_written_since_and_still_finds_a_damaged_one(
    frozen_sandbox, sync_env, capsys, monkeypatch
):
    """Before it chooses its days, a sync looks for damaged files over its service's whole
    window through the footers the lake keeps (`pipelines/lake/footers.py`): a file unchanged
    since its footer was read costs no read, so the look grows with what was written since,
    not with the lake's history; a file damaged since is read, and set aside."""
    sync_env(frozen_sandbox)
    for _ in range(2):  # the second sync's look reads every footer once, and keeps them
        assert main(["sync", "--streams", "trigger_logs"]) == 0
    lake = Lake(os.environ["LAKE_ROOT"])
    old = [p for p in lake.files(TRIGGER_LOGS) if file_day(p) < today() - timedelta(days=1)]
    assert len(old) > 10
    read: list[str] = []
    footer = Lake.footer
    monkeypatch.setattr(Lake, "footer", lambda lake, path: read.append(path) or footer(lake, path))

    assert main(["sync", "--streams", "trigger_logs"]) == 0
    assert not set(read) & set(old)

    damaged = Path(old[len(old) // 2])
    damage(damaged, "truncated")
    capsys.readouterr()
    assert main(["sync", "--streams", "trigger_logs"]) == 0
    assert f"damaged file set aside: {damaged}" in capsys.readouterr().out
    assert set(read) & set(old) == {str(damaged)}
    truth = frozen_sandbox.truth_days("comment", workspace_id(frozen_sandbox), "trigger_logs")
    assert landed_days(lake) == {day: count for day, count in truth.items() if count}


def flip_a_page_bit(path: Path, at: float = 3 / 4) -> None:
    """One bit changed inside the largest column's pages, `at` that far into them: the
    footer still reads."""
    data = bytearray(path.read_bytes())
    footer = pq.read_metadata(path)
    chunk = max(
        (footer.row_group(0).column(i) for i in range(footer.num_columns)),
        key=lambda column: column.total_compressed_size,
    )
    start = chunk.dictionary_page_offset or chunk.data_page_offset  # the chunk's first page
    data[start + int(chunk.total_compressed_size * at)] ^= 0x10
    path.write_bytes(data)


def flip_where_it_shows(lake: Lake, days: list[date] | None = None) -> Path:
    """A page bit flipped in the first file of `days` (of every day) where its checksum
    tells: a bit in a page's header may not show, so a few places are tried."""
    for path in (Path(p) for p in lake.files(TRIGGER_LOGS, days) if lake.footer(p).num_rows):
        before = path.read_bytes()
        for at in (3 / 4, 1 / 2, 7 / 8, 5 / 8, 3 / 8):
            flip_a_page_bit(path, at)
            if unreadable(lake, str(path), pages=True):
                return path
            path.write_bytes(before)
    raise AssertionError("no flip shows")


def test_a_bit_flipped_page_is_found_by_the_check_set_aside_and_landed_again(
    frozen_sandbox, sync_env, capsys
):
    """Regression: a bit-flipped file made `marts.activity_performance` fail with `invalid
    TType`, naming no file. Its footer reads; its pages, checksummed, tell."""
    sync_env(frozen_sandbox)
    assert main(["sync", "--streams", *STREAMS]) == 0
    lake = Lake(os.environ["LAKE_ROOT"])
    flipped = flip_where_it_shows(lake)
    assert lake.footer(str(flipped)).num_rows  # the footer still reads
    check = files_readable_check(TRIGGER_LOGS, asset_key(TRIGGER_LOGS))

    found = check(dg.build_asset_check_context(), lake=resources_or_problem()["lake"])
    assert not found.passed and f"found damaged: {flipped} (day " in found.description
    [kept] = damaged_of(lake, TRIGGER_LOGS)
    assert kept in found.description and not flipped.exists()
    assert main(["warehouse"]) == 0  # the warehouse opens without it meanwhile

    assert main(["sync", "--streams", "trigger_logs"]) == 0
    truth = frozen_sandbox.truth_days("comment", workspace_id(frozen_sandbox), "trigger_logs")
    assert landed_days(lake) == {day: count for day, count in truth.items() if count}
    again = check(dg.build_asset_check_context(), lake=resources_or_problem()["lake"])
    assert "found damaged" not in again.description and kept in again.description
    Path(kept).unlink()  # a person looked, and deleted it
    assert check(dg.build_asset_check_context(), lake=resources_or_problem()["lake"]).passed


def test_a_flipped_page_is_named_with_its_day_by_the_next_sync_and_warehouse(
    frozen_sandbox, sync_env, capsys
):
    """A page damaged since its day landed: the next sync, landing that day again, names the
    file and its day; `warehouse`, finding a closed day's, names them, says the next sync
    lands it again, and its row counts say the relation is short of that day until then."""
    sync_env(frozen_sandbox)
    first = today() - timedelta(days=RECENT_DAYS)
    assert main(["sync", "--streams", *STREAMS, "--start", first.isoformat()]) == 0
    lake = Lake(os.environ["LAKE_ROOT"])

    def flip(days) -> tuple[Path, str]:
        path = flip_where_it_shows(lake, days)
        capsys.readouterr()
        return path, path.parent.name.removeprefix("date=")

    flipped, day = flip([today() - timedelta(days=1)])  # a day the next sync lands
    assert main(["sync", "--streams", *STREAMS, "--start", first.isoformat()]) == 0
    said = capsys.readouterr()
    assert f"damaged file set aside, landed again: {flipped} (day {day}): " in said.err, said

    flipped, day = flip([first + timedelta(days=n) for n in range(2, 7)])  # closed days
    assert main(["warehouse"]) == 0
    out = capsys.readouterr().out
    assert f"damaged file(s) set aside: {flipped} (day {day}): " in out, out
    assert "the next sync lands them again" in out
    [counted] = [line for line in out.splitlines() if line.startswith("comment.trigger_logs ")]
    assert counted.endswith(f"short of day {day} (damaged, set aside; the next sync lands it)")

    assert main(["sync", "--streams", *STREAMS, "--start", first.isoformat()]) == 0
    assert "short of" not in capsys.readouterr().out
    truth = frozen_sandbox.truth_days("comment", workspace_id(frozen_sandbox), "trigger_logs")
    assert landed_days(lake) == {d: n for d, n in truth.items() if n and d >= str(first)}


def test_a_day_older_than_its_service_serves_is_said_to_need_a_backup(tmp_path):
    """No sync can land such a day again: what is said, and the row counts, say so."""
    lake = Lake(tmp_path / "lake")
    served = today() - timedelta(days=3)
    old = today() - timedelta(days=TRIGGER_LOGS.served_days + 3)
    for day in (old, served):
        lake.write(TRIGGER_LOGS, "default", [], day=day)
        damage(Path(lake.path(TRIGGER_LOGS, "default", day)), "not_parquet")
    found = set_aside_damaged(lake, TRIGGER_LOGS)
    told = damaged_note(found)
    assert f"(day {old}): " in told and f"(day {served}): " in told
    assert told.count("older than its service serves") == 1
    assert told.endswith("; the next sync lands them again")
    assert missing(lake, [TRIGGER_LOGS, ACCOUNTS], {"comment": ["default"]}) == {
        "comment.trigger_logs": [
            f"day {old} (damaged, set aside; older than its service serves, so no sync lands "
            "it again: restore it from a backup)",
            f"day {served} (damaged, set aside; the next sync lands it)",
        ]
    }
