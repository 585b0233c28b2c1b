"""One day policy (`pipelines/stream_run.days_to_sync`): the command line's sync without a
range and the hourly schedules take the same days. Yesterday and today on a synced lake, from
the oldest day a connection lacks otherwise, the whole served window on an empty lake."""

from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta

import dagster as dg
import pytest

from assets.definitions import defs
from assets.partitions import daily
from assets.resources import LakeResource
from assets.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pipelines.errors import SetupError
from pipelines.lake import Lake
from pipelines.pull.landing import today
from pipelines.registry import PULLED
from pipelines.settings import load_settings
from pipelines.stream_run import first_sync_day, service_window
from pipelines.sync import SyncReport, sync_days

STREAMS = [s for s in PULLED if s.service == "comment" and s.partitioned]


def scheduled(resources: dict, on) -> tuple[str, str]:
    """The days the comment service's hourly tick of `on` asks for."""
    schedule = defs.resolve_schedule_def("comment_daily_hourly")
    at = datetime.combine(on, time(5), tzinfo=UTC)
    needed = {key: resources[key] for key in ("lake", "comment")}
    with dg.build_schedule_context(resources=needed, scheduled_execution_time=at) as context:
        request = schedule.evaluate_tick(context).run_requests[0]
    tags = request.tags
    return tags[ASSET_PARTITION_RANGE_START_TAG], tags[ASSET_PARTITION_RANGE_END_TAG]


def by_command_line(lake: Lake) -> tuple[str, str]:
    """The range of the command line's sync without `--start` and `--end`: the widest of the
    comment streams' (one run each)."""
    settings, report = load_settings(), SyncReport()
    ranges = [sync_days(stream, lake, settings, (None, None), report) for stream in STREAMS]
    return min(days[0] for days in ranges).isoformat(), max(days[-1] for days in ranges).isoformat()


def test_the_schedule_and_the_command_line_take_the_days_of_one_policy(frozen_sandbox, sync_env):
    resources = sync_env(frozen_sandbox)
    on = today()
    lake = Lake(load_settings().lake_root)
    connections = [c.name for c in resources["comment"].connections]
    oldest = max(min(min(service_window(s, on)) for s in STREAMS), daily.start.date())

    # An empty lake: everything the service serves (from the first partition).
    assert scheduled(resources, on) == by_command_line(lake) == (oldest.isoformat(), str(on))

    # Every day since the first partition landed (the deployment starts later than the
    # service's window): yesterday and today, the days that can still change.
    for stream in STREAMS:
        for connection in connections:
            for day in service_window(stream, on):
                if day >= oldest:
                    lake.write(stream, connection, [], day=day)
    yesterday = (on - timedelta(days=1)).isoformat()
    assert scheduled(resources, on) == by_command_line(lake) == (yesterday, str(on))

    # A day one connection lacks, ten days back: from there.
    gap = on - timedelta(days=10)
    lake.fs.delete_file(lake.path(STREAMS[0], connections[-1], gap))
    assert scheduled(resources, on) == by_command_line(lake) == (gap.isoformat(), str(on))


def test_a_tick_whose_lake_cannot_be_read_still_asks_for_yesterday_and_today(
    frozen_sandbox, sync_env, monkeypatch
):
    resources = sync_env(frozen_sandbox)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing answers there
    broken = LakeResource(lake_root="s3://nowhere/lake")
    on = today()
    assert scheduled(resources | {"lake": broken}, on) == (
        (on - timedelta(days=1)).isoformat(),
        str(on),
    )


def test_a_services_schedule_follows_its_streams_declared_cadence(monkeypatch):
    """Hourly where the declarations say so, daily otherwise; a service whose day-partitioned
    streams disagree (one job for all) is refused when the code location loads."""
    from assets import definitions

    assert definitions._days_schedule("datahub").cron_schedule == "30 23 * * *"
    hourly_reports = [replace(s, hourly=True) if s.service == "datahub" else s for s in PULLED]
    monkeypatch.setattr(definitions, "PULLED", hourly_reports)
    schedule = definitions._days_schedule("datahub")
    assert (schedule.name, schedule.cron_schedule) == ("datahub_daily_hourly", "30 * * * *")
    one_daily = [replace(s, hourly=False) if s is STREAMS[0] else s for s in PULLED]
    monkeypatch.setattr(definitions, "PULLED", one_daily)
    with pytest.raises(ValueError, match="declare all or none `hourly`"):
        definitions._days_schedule("comment")


def test_a_start_date_that_is_not_a_day_is_one_message_naming_it(monkeypatch):
    monkeypatch.setenv("SYNC_START_DATE", "last monday")
    with pytest.raises(SetupError, match=r"SYNC_START_DATE='last monday' is not a day: give"):
        first_sync_day()
    monkeypatch.setenv("SYNC_START_DATE", "2026-10-01")
    assert first_sync_day() == date(2026, 10, 1)
