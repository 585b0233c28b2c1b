"""Schema drift against a sandbox that drifts (sandbox/drift.py): what a service adds,
retypes or stops sending reaches the warehouse in `_extra`, is reported by the landing's
metadata and warned on by `schema_matches`, and each contract does what pipelines/lake/drift.py
says; on a paged stream (trigger logs), snapshots (activities, channels, custom fields) and
files (the message backup, the member export)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, time, timedelta

import dagster as dg
import duckdb
import httpx
import pytest

from assets import comment, conversation, datahub
from assets.checks import schema_matches_check
from assets.factory import asset_key
from assets.resources import build_resources
from pipelines.errors import SetupError
from pipelines.lake import Lake
from pipelines.pull.landing import today
from pipelines.settings import load_settings
from pipelines.streams.comment import ACTIVITIES, TRIGGER_LOGS
from pipelines.streams.conversation import CHANNELS, MESSAGES
from pipelines.streams.datahub import CUSTOM_FIELDS, MEMBERS
from pipelines.warehouse.relations import refresh_warehouse
from sandbox.drift import DriftSpec, added_value

SPEC = ",".join(
    [
        "comment.trigger_logs:add=channel_tag:number",  # a new field, through Arrow's reader
        "comment.trigger_logs:retype=account_id:null",  # a required text turned null
        "comment.trigger_logs:remove=action",  # a required field gone
        "comment.activities:nest=stats.shares:number",  # a new field inside an object
        "conversation.channels:rename=name>title",  # one name gone, another new
        "conversation.channels:retype=id:string",  # a number sent as text
        "conversation.messages:add=reaction:string",  # a new column of a file
        "conversation.messages:remove=mime_type",  # a column the file no longer has
        "conversation.messages:retype=sender_id:string",  # a number column holding text
        "datahub.members:add=loyalty:number",
        "datahub.members:remove=city",
        "datahub.custom_fields:add=hint:object",
    ]
)
#: Per stream: kind -> path -> the JSON type the report names for its values.
EXPECTED = {
    TRIGGER_LOGS: {
        "new": {"channel_tag": "integer"},
        "retyped": {"account_id": "null"},
        "missing": {"action": ""},
    },
    ACTIVITIES: {"new": {"stats.shares": "integer"}},
    CHANNELS: {"new": {"title": "string"}, "retyped": {"id": "string"}, "missing": {"name": ""}},
    MESSAGES: {
        "new": {"reaction": "string"},
        "retyped": {"sender_id": "string"},
        "missing": {"mime_type": ""},
    },
    MEMBERS: {"new": {"loyalty": "string"}, "missing": {"city": ""}},
    CUSTOM_FIELDS: {"new": {"hint": "object"}},
}
ASSETS = {
    TRIGGER_LOGS: comment.ASSETS["trigger_logs"],
    ACTIVITIES: comment.ASSETS["activities"],
    CHANNELS: conversation.ASSETS["channels"],
    MESSAGES: conversation.ASSETS["messages"],
    MEMBERS: datahub.ASSETS["members"],
    CUSTOM_FIELDS: datahub.ASSETS["custom_fields"],
}
DAILY = (TRIGGER_LOGS, MESSAGES, MEMBERS)


def land(
    resources: dict,
    streams,
    raise_on_error: bool = True,
    instance: dg.DagsterInstance | None = None,
) -> dg.ExecuteInProcessResult:
    """The streams' assets, on `instance` (else a throwaway one); daily ones for yesterday
    and today. The last run's result."""
    daily = [ASSETS[s] for s in streams if s in DAILY]
    snapshots = [ASSETS[s] for s in streams if s not in DAILY]
    result = None
    if snapshots:
        result = dg.materialize(
            snapshots, resources=resources, instance=instance, raise_on_error=raise_on_error
        )
    if daily:
        last = today()
        tags = {
            "dagster/asset_partition_range_start": (last - timedelta(days=1)).isoformat(),
            "dagster/asset_partition_range_end": last.isoformat(),
        }
        result = dg.materialize(
            daily, resources=resources, tags=tags, instance=instance, raise_on_error=raise_on_error
        )
    return result


def reported_drift(instance: dg.DagsterInstance, stream) -> dict:
    """`schema_drift` of the stream's last run: an unpartitioned asset's materialization, a
    partitioned one's observation (its run's figures)."""
    key = asset_key(stream)
    kind = (
        dg.DagsterEventType.ASSET_OBSERVATION
        if ASSETS[stream].partitions_def is not None
        else dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    [record] = instance.get_event_records(
        dg.EventRecordsFilter(event_type=kind, asset_key=key), limit=1
    )
    event = record.event_log_entry.dagster_event.event_specific_data
    found = (
        event.materialization
        if kind == dg.DagsterEventType.ASSET_MATERIALIZATION
        else event.asset_observation
    )
    return found.metadata["schema_drift"].value


@pytest.fixture(scope="module")
def drifted(start_sandbox, tmp_path_factory):
    """A frozen sandbox drifting from the start, every stream above landed from it once."""
    sandbox = start_sandbox(drift=DriftSpec.parse(SPEC))
    folder = tmp_path_factory.mktemp("drifted")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in sandbox.environment(folder).items():
            patch.setenv(name, value)
        (folder / "sync.toml").write_text(
            "".join(
                f"[service.{s}]\npace = false\n" for s in ("comment", "conversation", "datahub")
            )
        )
        resources = build_resources(load_settings())
        with dg.DagsterInstance.ephemeral() as instance:
            land(resources, list(EXPECTED), instance=instance)
            settings = load_settings()
            refresh_warehouse(settings.lake_root, settings.warehouse_path, settings.warehouse_sql)
            yield sandbox, settings, resources, instance


def rows_with_extra(settings, stream) -> list[tuple]:
    """(id, `_extra` as a dict) of every row of the stream's warehouse view."""
    key = stream.key[-1]
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        rows = con.execute(f"SELECT {key}, _extra FROM {stream.relation}").fetchall()
    return [(key_value, json.loads(extra) if extra else None) for key_value, extra in rows]


@pytest.mark.parametrize("stream", list(EXPECTED), ids=lambda s: s.relation)
def test_drift_reaches_the_warehouse_and_is_reported_and_warned(drifted, stream):
    sandbox, settings, resources, instance = drifted
    rows = rows_with_extra(settings, stream)
    assert rows, "nothing landed: nothing compared"
    expected = EXPECTED[stream]
    # Every row holds each drift, with its value where the service sent one.
    for _, extra in rows:
        assert extra is not None
        assert {kind: set(extra.get(kind, ())) for kind in expected} == {
            kind: set(paths) for kind, paths in expected.items()
        }
    # The report: the rows (every row, for a snapshot), each value's JSON type, no value.
    report = reported_drift(instance, stream)
    for kind, paths in expected.items():
        for path, json_type in paths.items():
            figure = report[kind][path]
            assert figure.endswith(f" rows, {json_type}" if json_type else " rows")
            if stream not in DAILY:
                assert figure.startswith(f"{len(rows)} rows")
    # The check warns, naming what drifted.
    result = schema_matches_check(stream, asset_key(stream))(
        dg.build_asset_check_context(), lake=resources["lake"]
    )
    assert result.passed is False
    assert result.severity == dg.AssetCheckSeverity.WARN
    drift = result.metadata["schema_drift"].value
    assert {kind: set(paths) for kind, paths in drift.items()} == {
        kind: set(paths) for kind, paths in expected.items()
    }


def test_added_values_are_the_ones_the_service_sent(drifted):
    """Not only the names: each row's new value is what the sandbox derived for that row."""
    _, settings, _, _ = drifted
    for stream, field, type_ in [
        (TRIGGER_LOGS, "channel_tag", "number"),
        (ACTIVITIES, "stats.shares", "number"),
        (CUSTOM_FIELDS, "hint", "object"),
    ]:
        for key, extra in rows_with_extra(settings, stream):
            assert extra["new"][field] == added_value(stream.relation, field, type_, key)
    # A value of another type: the column holds what it converts to, `_extra` what was sent.
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        channels = con.execute("SELECT id, _extra FROM conversation.channels").fetchall()
    for channel_id, extra in channels:
        assert json.loads(extra)["retyped"]["id"] == str(channel_id)


def test_a_frozen_stream_fails_its_connections_and_writes_nothing(start_sandbox, sync_env):
    sandbox = start_sandbox(drift=DriftSpec.parse("datahub.custom_fields:add=hint:object"))
    resources = sync_env(
        sandbox, sync_toml='[service.datahub]\ncontracts = { custom_fields = "freeze" }\n'
    )
    result = land(resources, [CUSTOM_FIELDS], raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.step_failure_data.error.message
    assert "datahub connection 'default', stream datahub.custom_fields" in message
    assert "(hint)" in message and "contract is freeze" in message
    assert Lake(load_settings().lake_root).files(CUSTOM_FIELDS) == []


def test_discard_drops_new_and_retyped_values_and_still_reports_them(start_sandbox, sync_env):
    spec = "conversation.channels:rename=name>title,conversation.channels:retype=id:string"
    sandbox = start_sandbox(drift=DriftSpec.parse(spec))
    resources = sync_env(
        sandbox, sync_toml='[service.conversation.contracts]\nchannels = "discard"\n'
    )
    with dg.DagsterInstance.ephemeral() as instance:
        land(resources, [CHANNELS], instance=instance)
        report = reported_drift(instance, CHANNELS)
    lake = Lake(load_settings().lake_root)
    extras = [
        json.loads(e) if e else None
        for (e,) in lake.query(f"SELECT _extra FROM {lake.relation(CHANNELS)}")
    ]
    # What was missing stays said (nothing to keep); what was new or retyped is gone.
    assert extras and all(extra == {"missing": ["name"]} for extra in extras)
    assert set(report) == {"new", "retyped", "missing"}


def test_a_healthy_service_shows_no_drift(frozen_sandbox, sync_env):
    """No false alarm: what an undrifted service sends matches every declared schema, so
    `_extra` stays null and the check passes, having looked at rows."""
    resources = sync_env(frozen_sandbox)
    land(resources, list(EXPECTED))
    lake = Lake(load_settings().lake_root)
    for stream in EXPECTED:
        [(rows, drifted)] = lake.query(
            f"SELECT count(*), count(_extra) FROM {lake.relation(stream)}"
        )
        assert rows > 0 and drifted == 0, stream.relation
        result = schema_matches_check(stream, asset_key(stream))(
            dg.build_asset_check_context(), lake=resources["lake"]
        )
        assert result.passed and result.metadata["rows"].value == rows


def test_drift_from_a_moment_of_a_live_service_shows_from_that_moment(start_sandbox, sync_env):
    """A live sandbox whose trigger logs gain a field an hour into its day: the landing
    before is clean, the one after reports it, and the check turns to a warning."""
    noon = datetime.combine(today(), time(12), UTC)
    spec = DriftSpec.parse(
        "comment.trigger_logs:add=channel_tag:number", start=noon + timedelta(hours=1)
    )
    sandbox = start_sandbox(frozen=False, now=noon, arrivals_per_minute=30, drift=spec)
    resources = sync_env(sandbox)
    check = schema_matches_check(TRIGGER_LOGS, asset_key(TRIGGER_LOGS))
    land(resources, [TRIGGER_LOGS])
    assert check(dg.build_asset_check_context(), lake=resources["lake"]).passed
    httpx.post(f"{sandbox.url}/_sandbox/clock/advance", params={"seconds": 3700}).raise_for_status()
    land(resources, [TRIGGER_LOGS])
    result = check(dg.build_asset_check_context(), lake=resources["lake"])
    assert not result.passed
    assert set(result.metadata["schema_drift"].value) == {"new"}


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            '[service.comment.contracts]\ntrigger_log = "freeze"\n',
            'no stream "trigger_log" (did you mean "trigger_logs"?)',
        ),
        ('[service.comment.contracts]\ntrigger_logs = "frozen"\n', "contracts trigger_logs"),
    ],
)
def test_a_contract_naming_no_stream_or_no_contract_is_refused(
    tmp_path, monkeypatch, toml, message
):
    (tmp_path / "sync.toml").write_text(toml)
    monkeypatch.setenv("SYNC_CONFIG", str(tmp_path / "sync.toml"))
    with pytest.raises(SetupError, match=re.escape(message)):
        load_settings()
