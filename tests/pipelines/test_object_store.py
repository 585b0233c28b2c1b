"""The lake on object storage (`LAKE_ROOT=s3://bucket/prefix`, pipelines/lake/object_store.py),
against a local S3 server: moto's, started here from its PyPI package (no network, no
Docker). The pull, the push ledger and the webhook compaction land there and read back equal
to what was sent; files appear whole or not at all; a wrong setting is one line naming it."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from datetime import date, timedelta

import dagster as dg
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from moto.server import ThreadedMotoServer

import demo
from assets import datahub, definitions
from assets.resources import build_resources
from cli import main as cli
from demo.shop import generate_shop
from pipelines.lake import Lake, object_store
from pipelines.pull.landing import today
from pipelines.push.ledger import PUSHED, REJECTED, Ledger
from pipelines.settings import load_settings
from pipelines.stream import Stream, connection_schema
from pipelines.warehouse.reconcile import reconcile
from pipelines.webhooks.compaction import compact, stale_days
from pipelines.webhooks.inbox import Inbox
from tests.pipelines.test_comment import workspace_id
from tests.pipelines.test_sync import finished, sync
from tests.push.test_journal import entries
from tests.push.test_push import RECORDS, held_as_expected, run_push
from tests.webhooks.test_compaction import DAYS, assert_lake_equals_inbox, store

SECRET = "s3-test-secret-7d2e"
EVENTS = Stream("svc", "events", connection_schema([("id", pa.int64())]), daily=True)
DAY = date(2026, 11, 1)
#: Days of the day streams the sync test pulls (today included).
WINDOW_DAYS = 3
#: The day streams whose truth the sandbox tells per day.
TRUTH_BY_DAY = ("trigger_logs", "daily_stats", "messages")


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_root(s3_endpoint, monkeypatch) -> str:
    """A new bucket on the local server, the AWS variables pointed at it; its lake's URI."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    pafs.S3FileSystem(
        endpoint_override=s3_endpoint, region="us-east-1", allow_bucket_creation=True
    ).create_dir(bucket)
    return f"s3://{bucket}/team/lake"


def assert_lake_equals_truth(sandbox, lake: Lake, warehouse: str, first, last) -> None:
    """A sync of every stream limited to the days `first`..`last` against the truth:
    snapshot streams equal its totals, day streams its rows per day and connection (a day
    without rows has no group in the landed count), members and assignments the members of
    the landed messages."""
    daily = {s for s in definitions.STREAMS if s.name in TRUTH_BY_DAY}
    seen_in_messages = {s for s in definitions.STREAMS if s.key[:1] == ("channel_id",)}
    whole = [s for s in definitions.STREAMS if s not in daily | seen_in_messages]
    rows = reconcile(lake, warehouse, whole, sandbox.truth())
    assert [r for r in rows if not r.equal] == [] and all(r.rows for r in rows)
    scopes = {
        "comment": {"default": workspace_id(sandbox)},
        "conversation": {"default": "default", "jp": "jp"},
    }
    with lake.connect(warehouse, read_only=True) as con:
        for stream in daily:
            expected = {
                (connection, day): count
                for connection, scope in scopes[stream.service].items()
                for day, count in sandbox.truth_days(stream.service, scope, stream.name).items()
                if first.isoformat() <= day <= last.isoformat() and count
            }
            landed = con.execute(
                f"SELECT connection, date::VARCHAR, count(*) FROM {stream.relation} GROUP BY ALL"
            ).fetchall()
            landed = {(connection, day): count for connection, day, count in landed}
            assert sum(expected.values()) > 0 and landed == expected, stream.relation
        for stream in seen_in_messages:
            [(landed, seen)] = con.execute(
                f"SELECT (SELECT count(*) FROM {stream.relation}), (SELECT count(*) FROM "
                "(SELECT DISTINCT connection, channel_id, member_id FROM conversation.messages))"
            ).fetchall()
            assert landed == seen > 0, stream.relation


def test_files_land_whole_and_the_lake_is_read_as_its_state(s3_root):
    lake = Lake(s3_root)
    assert lake.files(EVENTS) == [] and lake.relation(EVENTS) is None
    assert lake.write(EVENTS, "a", [{"connection": "a", "id": 1}], DAY, {"pulled_at": "x"}) == 1
    lake.write(EVENTS, "b", [{"connection": "b", "id": 2}], date(2026, 11, 2))
    assert lake.days(EVENTS, "a") == [DAY]
    assert [lake.uri(path) for path in lake.files(EVENTS)] == [
        f"{s3_root}/svc/events/date=2026-11-01/a.parquet",
        f"{s3_root}/svc/events/date=2026-11-02/b.parquet",
    ]
    assert lake.read_metadata(lake.path(EVENTS, "a", DAY))["pulled_at"] == "x"
    sql = f"SELECT connection, id, date FROM {lake.relation(EVENTS)} ORDER BY id"
    assert lake.query(sql) == [("a", 1, DAY), ("b", 2, date(2026, 11, 2))]

    # A write that fails after a row group went out leaves the previous file, no other object.
    with pytest.raises(RuntimeError), lake.writer(EVENTS, "a", DAY) as out:
        out.extend([{"connection": "a", "id": n} for n in range(20_000)])
        raise RuntimeError("the page after")
    assert lake.read_table(lake.path(EVENTS, "a", DAY))["id"].to_pylist() == [1]
    assert len(lake.fs.get_file_info(pafs.FileSelector(lake.root, recursive=True))) == 6
    assert lake.sweep_temporary() == 0
    lake.drop(EVENTS, "b", date(2026, 11, 2))
    assert lake.days(EVENTS, "b") == []


def test_the_push_ledger_and_the_webhook_compaction_keep_their_state_in_the_bucket(
    s3_root, tmp_path
):
    lake = Lake(s3_root)
    acknowledged = [{k: v for k, v in e.items() if k != "record_type"} for e in entries(0, 3)]
    with Ledger(lake, tmp_path / "journal") as ledger:  # the journal stays on this host
        ledger.record("order", acknowledged)
        assert sorted(ledger.latest("order")) == ["ord-0", "ord-1", "ord-2"]
        rejection = {"key": "ord-9", "field": "total", "reason": "negative", "source": "validation"}
        ledger.reject("order", [rejection | {"row": "{}"}])
        first_seen = lake.read_table(lake.path(REJECTED, "order"))["first_seen"][0]
        ledger.reject("order", [rejection | {"row": "{}"}])  # seen again: read from the bucket
        assert lake.read_table(lake.path(REJECTED, "order"))["first_seen"][0] == first_seen
    assert len(lake.files(PUSHED)) == 1
    assert not list((tmp_path / "journal").glob("*.jsonl"))
    with Ledger(Lake(s3_root), tmp_path / "journal") as again:  # another process's view
        assert again.latest("order")["ord-2"].content_hash == "h2"

    with Inbox(tmp_path / "inbox.sqlite3") as inbox:
        keys = {k: day for day in DAYS for k in store(inbox, day, 2)}
        assert compact(inbox, lake).rows == 6
        assert stale_days(inbox, lake) == {}  # the watermark is read from the bucket
        assert compact(inbox, lake).days == []
        assert_lake_equals_inbox(lake, keys)


def test_a_sync_of_every_stream_into_the_bucket_equals_the_truth(
    frozen_sandbox, sync_env, s3_root, tmp_path, monkeypatch
):
    """Every stream, its days limited to the last `WINDOW_DAYS`: a year of day files is
    ~1,500 objects, each a PUT and its footer read, which moto serves at a few ms a request
    (docs/deployment.md). Snapshot streams equal the truth's totals, day streams
    its rows per day, members and assignments the members of the landed messages."""
    sync_env(frozen_sandbox)
    monkeypatch.setenv("LAKE_ROOT", s3_root)
    last = today()
    first = last - timedelta(days=WINDOW_DAYS - 1)
    output = finished(sync("--start", first.isoformat(), "--end", last.isoformat()))
    assert "FAILED" not in output and SECRET not in output
    assert not (tmp_path / "lake").exists(), "a local lake was written"
    lake, warehouse = Lake(s3_root), os.environ["WAREHOUSE_PATH"]

    assert_lake_equals_truth(frozen_sandbox, lake, warehouse, first, last)


def test_a_push_from_the_bucket_then_another_sends_nothing(
    start_sandbox, sync_env, s3_root, monkeypatch
):
    """The ledger in the bucket is what the second push is diffed against."""
    sandbox = start_sandbox()
    sync_env(sandbox)
    for name, value in demo.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LAKE_ROOT", s3_root)
    resources = build_resources(load_settings())
    with dg.DagsterInstance.ephemeral() as instance:
        dg.materialize(
            [datahub.ASSETS["custom_fields"], datahub.ASSETS["members"]],
            resources=resources,
            instance=instance,
        )
    generate_shop(resources["lake"].lake(), customers=100)
    first = run_push(resources)
    for record_type in RECORDS:
        assert first[record_type]["sent"] == len(held_as_expected(sandbox, resources, record_type))
    again = run_push(resources)
    assert {again[r]["sent"] for r in RECORDS} == {0}
    assert Lake(s3_root).files(PUSHED)


@pytest.mark.parametrize(
    ("mistake", "named", "code"),
    [
        ("bucket", "does not exist", 2),
        # A store down and a wrong address look alike: told as the environment's (1).
        ("endpoint", "correct AWS_ENDPOINT_URL", 1),
        ("scheme", "scheme 'gs' is not supported", 2),
        ("credentials", "put the key in AWS_ACCESS_KEY_ID", 2),
    ],
)
def test_a_wrong_setting_is_one_line_naming_it(
    s3_root, tmp_path, monkeypatch, capsys, mistake, named, code
):
    monkeypatch.setenv("WAREHOUSE_PATH", str(tmp_path / "warehouse.duckdb"))
    monkeypatch.setenv("SYNC_CONFIG", str(tmp_path / "sync.toml"))
    (tmp_path / "sync.toml").write_text("")
    monkeypatch.setenv(
        "LAKE_ROOT",
        {
            "bucket": "s3://no-such-bucket-here/lake",
            "endpoint": s3_root,
            "scheme": "gs://bucket/lake",
            "credentials": f"s3://id:{SECRET}@bucket/lake",
        }[mistake],
    )
    if mistake == "endpoint":
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard: none listens
    assert cli.main(["warehouse"]) == code
    output = capsys.readouterr()
    [line] = (output.out + output.err).strip().splitlines()
    assert line.startswith("error: LAKE_ROOT") and named in line
    assert SECRET not in line


def test_a_refusal_of_the_credentials_names_the_variables_and_hides_what_the_store_said():
    said = OSError(f"AWS Error ACCESS_DENIED during ListObjectsV2: InvalidAccessKeyId {SECRET}")
    told = str(object_store.explain(said, "s3://b/lake"))
    assert "AWS_ACCESS_KEY_ID" in told and "AWS_SECRET_ACCESS_KEY" in told
    assert SECRET not in told


def test_a_step_on_a_missing_bucket_fails_saying_what_to_fix(
    frozen_sandbox, sync_env, s3_root, monkeypatch
):
    """A run the UI or a schedule launches (no command line to check the lake first): the
    step fails with the same one-line reason, not the store's first refusal."""
    sync_env(frozen_sandbox)
    monkeypatch.setenv("LAKE_ROOT", "s3://no-such-bucket-here/lake")
    workspace = next(a for a in definitions.STREAM_ASSETS if a.key.path == ["comment", "workspace"])

    result = dg.materialize(
        [workspace],
        resources=build_resources(load_settings()),
        raise_on_error=False,
    )

    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    assert error.cls_name == "Failure" and ": LAKE_ROOT=s3://no-such-bucket-here" in error.message
    assert "does not exist" in error.message and SECRET not in error.message
