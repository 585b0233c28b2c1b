"""The checks on a live sandbox whose clock moves between the landings and the checks: no
false alarm from what arrived meanwhile, a real discrepancy still fails, and a check that
compared nothing is not green."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from time import sleep

import dagster as dg
import pyarrow.parquet as pq
import pytest

from assets import comment, conversation, datahub
from assets.resources import LakeResource
from pipelines.lake import file_stem
from pipelines.pull.landing import today
from pipelines.streams.comment import DAILY_STATS, TRIGGER_LOGS
from pipelines.streams.conversation import MEMBERS, MESSAGES
from pipelines.streams.datahub import BROADCAST_REPORTS, BROADCASTS

#: Live trigger logs (and data hub changes) per minute of the sandbox's clock.
ARRIVALS_PER_MINUTE = 30
#: A data hub campaign, and so a new broadcast, comes every 30 minutes of the clock.
PAST_A_CAMPAIGN = 31 * 60


def live_sandbox(start_sandbox):
    """A moving sandbox on the pipeline's day (`today()`, the wall clock's): its clock starts
    at noon of that day, so the hour at most these tests push it forward stays on it."""
    now = datetime.now(UTC)
    to_midnight = datetime.combine(now.date() + timedelta(days=1), time(), UTC) - now
    if to_midnight < timedelta(minutes=5):  # a test takes seconds; be sure it ends today
        sleep(to_midnight.total_seconds() + 1)
    return start_sandbox(
        frozen=False,
        now=datetime.combine(today(), time(12), UTC),
        arrivals_per_minute=ARRIVALS_PER_MINUTE,
    )


def land(resources: dict, assets: list, first=None, last=None) -> None:
    tags = {}
    if first is not None:
        tags = {
            "dagster/asset_partition_range_start": first.isoformat(),
            "dagster/asset_partition_range_end": last.isoformat(),
        }
    dg.materialize(assets, resources=resources, tags=tags)


def rows(lake, stream, connection: str = "default") -> int:
    return sum(
        lake.footer(path).num_rows for path in lake.files(stream) if file_stem(path) == connection
    )


# -- comment --------------------------------------------------------------------------------


def sync_with_a_years_partitions(stream: str, first: date, last: date) -> None:
    """`python -m cli sync` of `stream` over `first`..`last`, its partitions a year long
    as a user's are (this process's start HISTORY_DAYS back, tests/conftest.py): the service's
    total is conclusive only once every closed day of its 365 is landed."""
    subprocess.run(
        [sys.executable, "-m", "cli", "sync", "--streams", stream]
        + ["--start", first.isoformat(), "--end", last.isoformat()],
        env={k: v for k, v in os.environ.items() if k != "SYNC_START_DATE"},
        check=True,
        capture_output=True,
        timeout=600,
    )


def land_comment(sandbox) -> None:
    """Stats, then logs arriving, then the logs (of the service's whole window, the days
    before the sandbox's history empty), then more logs arriving: the order a live sync meets
    them in."""
    clock, last = sandbox.app.sandbox.clock, today()
    sync_with_a_years_partitions("comment.daily_stats", last - timedelta(days=89), last)
    clock.advance(120)
    sync_with_a_years_partitions("comment.trigger_logs", last - timedelta(days=364), last)
    clock.advance(120)


def test_comment_checks_compare_closed_days_while_logs_keep_arriving(start_sandbox, sync_env):
    """Today's logs against today's stats landed earlier, and the service's total against
    landed logs a few arrivals old, failed on a healthy lake."""
    sandbox = live_sandbox(start_sandbox)
    resources = sync_env(sandbox)
    land_comment(sandbox)
    lake, day = resources["lake"].lake(), today()
    # What the old rules compared differs: today kept changing between the pulls.
    [(stats_today,)] = lake.query(
        f"SELECT public_replies + dms + failed FROM {lake.relation(DAILY_STATS)} "
        f"WHERE date = '{day}'"
    )
    logs_today = pq.read_metadata(lake.path(TRIGGER_LOGS, "default", day)).num_rows
    assert logs_today > stats_today
    truth = sum(
        len(sandbox.truth_ids("comment", scope, "trigger_logs"))
        for scope in sandbox.truth()["comment"]
    )
    assert truth > rows(lake, TRIGGER_LOGS)

    reconciled = comment.logs_match_daily_stats(
        dg.build_asset_check_context(), lake=resources["lake"]
    )
    assert reconciled.passed
    assert reconciled.metadata["days_compared"].value == 89
    total = comment.rows_equal_service_total(comment=resources["comment"], lake=resources["lake"])
    assert total.passed, total.metadata
    assert total.severity == dg.AssetCheckSeverity.ERROR
    assert total.metadata["conclusive"].value is True


def test_comment_checks_fail_on_a_closed_day_that_lost_a_log(start_sandbox, sync_env):
    sandbox = live_sandbox(start_sandbox)
    resources = sync_env(sandbox)
    land_comment(sandbox)
    lake = resources["lake"].lake()
    yesterday = today() - timedelta(days=1)
    path = lake.path(TRIGGER_LOGS, "default", yesterday)
    landed = pq.read_table(path)  # its metadata, `pulled_at` with it, stays
    assert landed.num_rows > 0
    pq.write_table(landed.slice(1), path)

    reconciled = comment.logs_match_daily_stats(
        dg.build_asset_check_context(), lake=resources["lake"]
    )
    assert not reconciled.passed
    assert reconciled.severity == dg.AssetCheckSeverity.ERROR
    [mismatch] = reconciled.metadata["days_mismatched"].value
    assert mismatch["date"] == str(yesterday)
    assert mismatch["logs"] == mismatch["stats"] - 1
    total = comment.rows_equal_service_total(comment=resources["comment"], lake=resources["lake"])
    assert not total.passed
    assert total.severity == dg.AssetCheckSeverity.ERROR

    # A closed day missing from the lake: the totals differ, but only as a warning, as a
    # day not landed yet is what a backfill in progress looks like too.
    Path(path).unlink()
    total = comment.rows_equal_service_total(comment=resources["comment"], lake=resources["lake"])
    assert not total.passed
    assert total.severity == dg.AssetCheckSeverity.WARN


def test_a_lake_that_starts_later_than_the_services_window_is_compared_over_its_days(
    start_sandbox, sync_env
):
    """A deployment whose history starts ten days back (a recent `SYNC_START_DATE`, or `make
    dev`'s first hours) was told "not conclusive" at every run: the service's count of its
    365 days against ten landed. It is compared over the days it holds, while logs keep
    arriving, and a log lost from one of them is an error."""
    sandbox = live_sandbox(start_sandbox)
    resources = sync_env(sandbox)
    last = today()
    land(resources, [comment.ASSETS["trigger_logs"]], last - timedelta(days=10), last)
    sandbox.app.sandbox.clock.advance(120)  # logs arriving after the landing
    total = comment.rows_equal_service_total(comment=resources["comment"], lake=resources["lake"])
    assert total.passed, total.metadata
    assert total.severity == dg.AssetCheckSeverity.ERROR
    assert total.metadata["conclusive"].value is True
    compared = total.metadata["connections"].value["default"]
    assert compared["days_compared"] == compared["days_landed"] == 10
    assert compared["landed"] == compared["service_total"] > 0

    lake = resources["lake"].lake()
    path = lake.path(TRIGGER_LOGS, "default", last - timedelta(days=4))
    landed = pq.read_table(path)  # its metadata, `pulled_at` with it, stays
    pq.write_table(landed.slice(1), path)
    total = comment.rows_equal_service_total(comment=resources["comment"], lake=resources["lake"])
    assert not total.passed
    assert total.severity == dg.AssetCheckSeverity.ERROR


def test_a_day_pulled_before_it_ended_is_not_compared(frozen_sandbox, sync_env):
    resources = sync_env(frozen_sandbox)
    last = today()
    land(resources, [comment.ASSETS["daily_stats"]], last - timedelta(days=89), last)
    land(resources, [comment.ASSETS["trigger_logs"]], last - timedelta(days=2), last)
    lake = resources["lake"].lake()
    yesterday = last - timedelta(days=1)
    path = lake.path(TRIGGER_LOGS, "default", yesterday)
    landed = pq.read_table(path)
    noon = datetime.combine(yesterday, time(12), UTC)
    metadata = {**landed.schema.metadata, b"pulled_at": noon.isoformat().encode()}
    pq.write_table(landed.slice(1).replace_schema_metadata(metadata), path)

    reconciled = comment.logs_match_daily_stats(
        dg.build_asset_check_context(), lake=resources["lake"]
    )
    assert reconciled.passed
    assert reconciled.metadata["days_compared"].value == 1
    assert reconciled.metadata["days_pulled_before_they_ended"].value == 1


def test_logs_against_stats_not_landed_is_not_green(frozen_sandbox, sync_env):
    """It passed with `days_compared: 0` when the stats were not landed."""
    resources = sync_env(frozen_sandbox)
    last = today()
    land(resources, [comment.ASSETS["trigger_logs"]], last - timedelta(days=1), last)
    result = comment.logs_match_daily_stats(dg.build_asset_check_context(), lake=resources["lake"])
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.WARN
    assert result.description == "nothing compared: daily stats not landed"
    # Stats of today only: no closed day on both sides.
    land(resources, [comment.ASSETS["daily_stats"]], last, last)
    result = comment.logs_match_daily_stats(dg.build_asset_check_context(), lake=resources["lake"])
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.WARN
    assert result.metadata["days_compared"].value == 0


# -- data hub -------------------------------------------------------------------------------


def land_todays_reports(resources: dict) -> None:
    dg.materialize(
        [datahub.ASSETS["broadcast_reports"]],
        resources=resources,
        partition_key=today().isoformat(),
    )


def listed_and_reported(lake) -> tuple[set[int], set[int]]:
    """The default region's listed broadcasts and the broadcasts of today's reports."""
    listed = pq.read_table(lake.path(BROADCASTS, "default"))["id"]
    reported = pq.read_table(lake.path(BROADCAST_REPORTS, "default", today()))["broadcast_id"]
    return set(listed.to_pylist()), set(reported.to_pylist())


def test_reports_pulled_before_a_new_broadcast_are_not_missing_it(start_sandbox, sync_env):
    """Reports pulled, a broadcast appears, broadcasts pulled: the new one has no report
    yet, which failed the check on a healthy lake."""
    sandbox = live_sandbox(start_sandbox)
    resources = sync_env(sandbox)
    land_todays_reports(resources)
    sandbox.app.sandbox.clock.advance(PAST_A_CAMPAIGN)
    land(resources, [datahub.ASSETS["broadcasts"]])
    lake = resources["lake"].lake()
    listed, reported = listed_and_reported(lake)
    assert listed - reported  # what the old rule counted as missing

    result = datahub.one_report_per_broadcast(lake=resources["lake"])
    assert result.passed, result.metadata
    assert result.metadata["reports_of_unknown_broadcasts"].value == {"default": 0, "jp": 0}


def test_reports_pulled_after_a_new_broadcast_are_not_unknown(start_sandbox, sync_env):
    """Broadcasts pulled, a broadcast appears, reports pulled (the sync's order): the
    report of the new one is not of an unknown broadcast."""
    sandbox = live_sandbox(start_sandbox)
    resources = sync_env(sandbox)
    land(resources, [datahub.ASSETS["broadcasts"]])
    sleep(1)  # `pulled_at` is in seconds: the reports come after, as in a sync
    sandbox.app.sandbox.clock.advance(PAST_A_CAMPAIGN)
    land_todays_reports(resources)
    lake = resources["lake"].lake()
    listed, reported = listed_and_reported(lake)
    assert reported - listed  # what the old rule counted as unknown

    result = datahub.one_report_per_broadcast(lake=resources["lake"])
    assert result.passed, result.metadata
    assert result.metadata["broadcasts_without_report"].value == {"default": 0, "jp": 0}

    # A listed broadcast whose report is lost is still found.
    path = lake.path(BROADCAST_REPORTS, "default", today())
    pq.write_table(pq.read_table(path).slice(1), path)
    result = datahub.one_report_per_broadcast(lake=resources["lake"])
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.ERROR
    assert result.metadata["broadcasts_without_report"].value["default"] == 1


# -- conversation ---------------------------------------------------------------------------


def test_members_of_messages_landed_since_are_not_missing(start_sandbox, sync_env):
    """Messages landed again after the members were looked up bring new members, which the
    old rule counted against the snapshot."""
    sandbox = live_sandbox(start_sandbox)
    resources = sync_env(sandbox)
    day = today()
    land(resources, [conversation.ASSETS["messages"]], day - timedelta(days=1), day)
    land(resources, [conversation.ASSETS["members"]])
    lake = resources["lake"].lake()
    seen_before = rows(lake, MEMBERS)
    sandbox.app.sandbox.clock.advance(3600)
    land(resources, [conversation.ASSETS["messages"]], day, day)
    [(seen_now,)] = lake.query(
        f"SELECT count(*) FROM (SELECT DISTINCT channel_id, member_id "
        f"FROM {lake.relation(MESSAGES)} WHERE connection = 'default')"
    )
    assert seen_now > seen_before  # what the old rule counted against the snapshot

    check = conversation.CHECKS[-2]  # matches_members_in_messages of members
    assert next(iter(check.check_keys)).asset_key == conversation.ASSETS["members"].key
    result = check(conversation=resources["conversation"], lake=resources["lake"])
    assert result.passed, result.metadata
    assert result.metadata["message_files_landed_since"].value["default"] == 1

    # A member of yesterday's messages (covered by the snapshot), lost from it, is found.
    yesterday = pq.read_table(lake.path(MESSAGES, "default", day - timedelta(days=1)))
    lost = yesterday["channel_id"][0].as_py(), yesterday["member_id"][0].as_py()
    path = lake.path(MEMBERS, "default")
    snapshot = pq.read_table(path)
    kept = [
        (c, m) != lost
        for c, m in zip(snapshot["channel_id"].to_pylist(), snapshot["id"].to_pylist(), strict=True)
    ]
    pq.write_table(snapshot.filter(kept), path)
    result = check(conversation=resources["conversation"], lake=resources["lake"])
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.ERROR


# -- every check ----------------------------------------------------------------------------

EVERY_CHECK = [*comment.CHECKS, *conversation.CHECKS, *datahub.CHECKS]


@pytest.mark.parametrize(
    "check", EVERY_CHECK, ids=lambda c: next(iter(c.check_keys)).to_user_string()
)
def test_every_check_says_what_it_compares(check):
    [spec] = check.check_specs
    assert spec.description and len(spec.description) > 40


LAKE_ONLY = [
    check for check in EVERY_CHECK if set(check.required_resource_keys) <= {"lake", "io_manager"}
]


@pytest.mark.parametrize(
    "check", LAKE_ONLY, ids=lambda c: next(iter(c.check_keys)).to_user_string()
)
def test_a_check_of_an_empty_lake_is_not_green(check, tmp_path):
    context = [dg.build_asset_check_context()] if check.op.compute_fn.has_context_arg() else []
    result = check(*context, lake=LakeResource(lake_root=str(tmp_path)))
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.WARN
    assert result.description.startswith("nothing compared: ")


def test_a_check_that_compared_nothing_is_skipped_in_a_run_saying_why(tmp_path):
    """In a run it records no result: its planned evaluation stays planned in a run that
    succeeded, which the UI shows "Skipped", not a warning beside the checks that found
    something; why is its step's output."""
    check = comment.tokens_not_expiring
    [key] = check.check_keys
    job = dg.define_asset_job("only_the_check", selection=dg.AssetSelection.checks(check))
    lake = LakeResource(lake_root=str(tmp_path / "lake"))
    defs = dg.Definitions(asset_checks=[check], jobs=[job], resources={"lake": lake})
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = defs.resolve_job_def(job.name).execute_in_process(instance=instance)
        [record] = instance.event_log_storage.get_asset_check_execution_history(key, limit=5)
    assert result.success and result.get_asset_check_evaluations() == []
    assert record.status.value == "PLANNED" and record.run_id == result.run_id
    [said] = [
        event.event_specific_data.metadata
        for event in result.all_events
        if event.event_type == dg.DagsterEventType.STEP_OUTPUT
    ]
    assert said["check"].value == key.to_user_string()
    assert said["nothing_compared"].value == "accounts not landed"
