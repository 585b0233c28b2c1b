"""Secret canary: a secret canary key never appears in logs, metadata, errors or files. Keys
reach the code through `dg.EnvVar` and must never leave it, whether the service refuses them
or accepts them.

What is searched: everything the sync printed (stdout/stderr at the file-descriptor level and
every log record), the sync's report, every event of every run in the Dagster instance
(step failures with their causes, materialization metadata, check results, the runs' config
and tags), and every file under the test's directory: the lake, the warehouse and
DAGSTER_HOME. Files are read as bytes and, since Parquet pages, Dagster's SQLite snapshots
and DuckDB files can be compressed, also decoded (Parquet rows and metadata, every SQLite
cell with zlib-compressed blobs inflated, the DuckDB catalog's view definitions).
"""

import logging
import sqlite3
import uuid
import zlib
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow.parquet as pq
from dagster._serdes import serialize_value

from cli.main import run_sync
from pipelines.pull.landing import today

#: The sandbox runs in this process (conftest.py): its own loggers are not the pipeline's.
SANDBOX_LOGGERS = ("uvicorn", "sandbox")
DEMO_KEYS = ("sa_live_demo_readonly", "demo-apikey")
#: Days of the day streams each sync here lands, today included: every day's file, event and
#: metadata is written by the same code, so a few days stand for the whole history.
DAYS = 3


def recent_start() -> date:
    """The first day of the syncs here."""
    return today() - timedelta(days=DAYS - 1)


def _inflated(blob: bytes) -> bytes:
    """Dagster stores job snapshots zlib-compressed in its SQLite run storage."""
    try:
        return zlib.decompress(blob)
    except zlib.error:
        return blob


def _sqlite_text(path: Path) -> str:
    parts = []
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in con.execute(f'SELECT * FROM "{table}"'):
                for cell in row:
                    if isinstance(cell, bytes):
                        parts.append(_inflated(cell).decode("utf-8", "replace"))
                    else:
                        parts.append(str(cell))
    finally:
        con.close()
    return "\n".join(parts)


def _duckdb_text(path: Path) -> str:
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.sql("SELECT schema_name, view_name, sql FROM duckdb_views()").fetchall()
        rows += con.sql("SELECT schema_name, table_name, sql FROM duckdb_tables()").fetchall()
    finally:
        con.close()
    return "\n".join(str(row) for row in rows)


def written(root: Path) -> dict[str, str]:
    """Every file under `root`: its raw bytes, plus its decoded content where compressed."""
    files = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        text = raw.decode("latin-1")
        if raw.startswith(b"SQLite format 3\x00"):
            text += _sqlite_text(path)
        elif path.suffix == ".parquet":
            parquet = pq.ParquetFile(path)
            text += str(parquet.metadata.metadata) + str(parquet.read().to_pylist())
        elif path.suffix == ".duckdb":
            text += _duckdb_text(path)
        files[str(path.relative_to(root))] = text
    return files


def instance_events(dagster_home: Path) -> tuple[list, dict[str, str]]:
    """Every run in the instance and, per run, its record and events serialized."""
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        runs = instance.get_runs()
        events = [(run, instance.all_logs(run.run_id)) for run in runs]
    serialized = {
        run.run_id: serialize_value(run) + "\n".join(serialize_value(e) for e in logs)
        for run, logs in events
    }
    return [e for _, logs in events for e in logs], serialized


def step_failures(events) -> list[str]:
    return [
        e.dagster_event.step_failure_data.error.to_string()
        for e in events
        if e.dagster_event is not None and e.dagster_event.is_step_failure
    ]


def materialization_metadata(events) -> list[str]:
    """Every materialization's and observation's metadata (daily assets report their run's
    figures as an observation)."""
    return [
        str(reported.metadata)
        for e in events
        if (reported := e.asset_materialization or e.asset_observation) is not None
    ]


def pipeline_logs(caplog) -> str:
    lines = []
    for record in caplog.records:
        if record.name.split(".")[0] in SANDBOX_LOGGERS:
            continue
        lines.append(f"{record.name} {record.getMessage()} {record.exc_text or ''}")
        if record.exc_info and record.exc_info[1] is not None:
            lines.append(repr(record.exc_info[1]))
    return "\n".join(lines)


def assert_nowhere(secrets, *, output, logs, report, events, runs, files) -> None:
    for secret in secrets:
        assert secret not in output.out, f"{secret} printed on stdout"
        assert secret not in output.err, f"{secret} printed on stderr"
        assert secret not in logs, f"{secret} in a log record"
        assert secret not in report, f"{secret} in the sync report"
        for failure in step_failures(events):
            assert secret not in failure, f"{secret} in a step failure"
        for metadata in materialization_metadata(events):
            assert secret not in metadata, f"{secret} in materialization metadata"
        for run_id, serialized in runs.items():
            assert secret not in serialized, f"{secret} in the events of run {run_id}"
        for name, content in files.items():
            assert secret not in content, f"{secret} in the file {name}"


def test_a_refused_canary_key_appears_in_no_output_error_metadata_or_file(
    frozen_sandbox, sync_env, tmp_path, monkeypatch, capfd, caplog
):
    sync_env(frozen_sandbox)
    canaries = {
        "COMMENT_AUTOMATION_API_KEY": f"sa_live_CANARY_{uuid.uuid4().hex}",
        "CONVERSATION_API_KEY": f"CANARY-conversation-{uuid.uuid4().hex}",
        "CONVERSATION_JP_API_KEY": f"CANARY-conversation-jp-{uuid.uuid4().hex}",
    }
    for variable, canary in canaries.items():
        monkeypatch.setenv(variable, canary)
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    caplog.set_level(logging.DEBUG)

    report = run_sync(["comment", "conversation.channels"], start=recent_start())

    output = capfd.readouterr()
    events, runs = instance_events(dagster_home)
    failures = step_failures(events)
    # The keys were sent and refused: every step that calls a service failed with a 401,
    # and said so (the failure is useful without the key).
    assert not report.ok
    assert {"trigger_logs", "daily_stats", "channels", "workspace"} <= {
        relation.split(".")[-1] for relation in report.failed
    }, report.failed
    assert failures and all("401" in f for f in failures), failures
    # The event log and the lake really are on disk, so the file search means something.
    files = written(tmp_path)
    assert any(name.startswith("dagster/") for name in files), sorted(files)
    # The comment snapshots, trigger_logs, daily_stats, then the conversation channels.
    assert len(runs) == 4
    assert_nowhere(
        canaries.values(),
        output=output,
        logs=pipeline_logs(caplog),
        report=str(report),
        events=events,
        runs=runs,
        files=files,
    )


def test_the_demo_keys_of_a_successful_sync_appear_in_no_output_metadata_or_file(
    frozen_sandbox, sync_env, tmp_path, monkeypatch, capfd, caplog
):
    sync_env(frozen_sandbox)
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    caplog.set_level(logging.DEBUG)

    report = run_sync(["comment"], start=recent_start())

    output = capfd.readouterr()
    assert report.ok, report.failed
    events, runs = instance_events(dagster_home)
    landed = {e.asset_materialization.asset_key for e in events if e.asset_materialization}
    # Seven streams landed (one materialization per day of the daily ones, with that day's
    # rows), each run with its requests recorded.
    assert len(landed) == 7, landed
    assert all("rows" in m for m in materialization_metadata(events))
    assert sum("requests" in m for m in materialization_metadata(events)) == 7
    files = written(tmp_path)
    assert any(name.endswith(".parquet") for name in files), sorted(files)
    assert any(name.startswith("dagster/") for name in files), sorted(files)
    assert "warehouse.duckdb" in files
    assert_nowhere(
        DEMO_KEYS,
        output=output,
        logs=pipeline_logs(caplog),
        report=str(report),
        events=events,
        runs=runs,
        files=files,
    )
