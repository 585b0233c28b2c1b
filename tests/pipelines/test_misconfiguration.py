"""One thing wrong at a time, as a new user meets it: a connection that fails is reported
with what to fix and fails alone (the others land), a refused address fails in seconds, a
mistake in the settings is one message naming the file and the setting (no traceback), a
key is never echoed, and `python -m cli check` tells each connection's state."""

import logging
import os
import shutil
import uuid
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import pytest

from assets.comment import ASSETS, rows_equal_service_total
from assets.resources import SetupProblem, resources_or_problem
from assets.setup_check import check_setup
from bench.common import ROOT
from cli.main import main, run_sync
from pipelines.settings import load_settings
from pipelines.transport import RetryPolicy, ServiceError, Transport
from tests.pipelines.conftest import COMMENT_KEY
from tests.pipelines.test_secrets import assert_nowhere, instance_events, pipeline_logs, written

AGENCY = """
[[connections.comment]]
name = "agency"
base_url = "{url}/comment/api/v1"
api_key_env = "AGENCY_KEY"
"""
AGENCY_KEY = "sa_live_agency_readwrite"


def landed_connections(stream: str) -> set[str]:
    lake = Path(load_settings().lake_root)
    return {path.stem for path in lake.glob(f"{stream}/**/*.parquet")}


def test_a_wrong_key_fails_its_connection_only_and_names_its_variable(
    frozen_sandbox, sync_env, monkeypatch, capsys
):
    sync_env(frozen_sandbox, sync_toml=AGENCY.format(url=frozen_sandbox.url))
    monkeypatch.setenv("COMMENT_AUTOMATION_API_KEY", "sa_live_not_a_key")
    monkeypatch.setenv("AGENCY_KEY", AGENCY_KEY)

    code = main(["sync", "--streams", "accounts", "activities"])

    err = capsys.readouterr().err
    assert code == 1
    # The agency workspace, whose key is valid, landed both streams.
    assert landed_connections("comment/accounts") == {"agency"}
    assert landed_connections("comment/activities") == {"agency"}
    failed = [line for line in err.splitlines() if line.startswith("- comment connection")]
    assert failed and all(
        "'default'" in line
        and frozen_sandbox.url in line
        and "COMMENT_AUTOMATION_API_KEY was refused" in line
        for line in failed
    ), err
    assert "Traceback" not in err and "Stack Trace" not in err
    # Each failed step told once, after the run; not by its class.
    assert len(failed) == 2 and "dagster._core" not in err


def test_a_missing_key_fails_its_connection_and_every_other_service_lands(
    frozen_sandbox, sync_env, monkeypatch
):
    sync_env(frozen_sandbox)
    monkeypatch.delenv("COMMENT_AUTOMATION_API_KEY")

    report = run_sync(["workspace", "channels"])

    assert set(report.failed) == {"comment.workspace"}
    assert "COMMENT_AUTOMATION_API_KEY" in report.failed["comment.workspace"]
    assert "is not set" in report.failed["comment.workspace"]
    assert report.succeeded == ["conversation.channels"]
    assert landed_connections("conversation/channels") == {"default", "jp"}


def test_a_base_url_without_its_version_names_the_url_and_its_variable(
    frozen_sandbox, sync_env, monkeypatch
):
    sync_env(frozen_sandbox)
    monkeypatch.setenv("COMMENT_AUTOMATION_URL", f"{frozen_sandbox.url}/comment/api")

    report = run_sync(["workspace"])

    reason = report.failed["comment.workspace"]
    assert "404" in reason
    assert f"({frozen_sandbox.url}/comment/api)" in reason
    assert "check COMMENT_AUTOMATION_URL" in reason


def test_a_refused_connection_is_tried_three_times_not_the_whole_retry_budget():
    waits: list[float] = []
    # Port 9 (discard): nothing listens on it here.
    transport = Transport(
        "http://127.0.0.1:9/v1",
        {},
        api_key="k",
        retry=RetryPolicy(attempts=8, sleep=waits.append),
    )
    with transport, pytest.raises(httpx.ConnectError):
        transport.request_json("GET", "/me")
    assert len(waits) == 2
    assert transport.stats.requests == 3
    # What can recover still has the whole budget.
    answers = iter([httpx.Response(503)] * 8)
    flaky = Transport(
        "http://hub/v1",
        {},
        api_key="k",
        retry=RetryPolicy(attempts=8, sleep=waits.append),
        http_transport=httpx.MockTransport(lambda request: next(answers)),
    )
    with flaky, pytest.raises(ServiceError):
        flaky.request_json("GET", "/me")
    assert flaky.stats.requests == 8


BAD_FILES = {
    "a TOML syntax error": ("x = \n", ["is not valid TOML", "line 1, column 5"]),
    "a missing field": (
        '[[connections.comment]]\nname = "agency"\nbase_url = "http://h/v1"\n',
        ["[[connections.comment]] entry 1 lacks api_key_env"],
    ),
    "a misspelt setting": (
        "[service.comment]\nrate_windw_seconds = 2\n",
        ['no setting "rate_windw_seconds"', 'did you mean "rate_window_seconds"'],
    ),
    "a misspelt section": (
        "[servce.conversation]\npace = false\n",
        ['unknown section "servce"', 'did you mean "service"'],
    ),
    "a misspelt service": (
        "[service.conversatoin]\npace = false\n",
        ["[service.conversatoin]", 'did you mean "conversation"'],
    ),
    "no connection at a time": (
        "[service.datahub]\nconnections_at_once = 0\n",
        ["connections_at_once", "greater than or equal to 1"],
    ),
    "paths of a service that documents them all": (
        '[paths.comment]\nme = "/me"\n',
        ["[paths.comment]", "nothing to override"],
    ),
    "a base URL that is not one": (
        '[[connections.comment]]\nname = "agency"\nbase_url = "comment/v1"\n'
        'api_key_env = "AGENCY_KEY"\n',
        ["base_url is not an http(s) address"],
    ),
    "a key where its variable's name belongs": (
        '[[connections.comment]]\nname = "agency"\nbase_url = "http://h/v1"\n'
        f'api_key_env = "{AGENCY_KEY}"\n',
        ["api_key_env must name the environment variable"],
    ),
}


@pytest.mark.parametrize("content, told", BAD_FILES.values(), ids=BAD_FILES)
def test_a_mistake_in_the_settings_file_is_one_message_naming_it(
    frozen_sandbox, sync_env, tmp_path, capsys, content, told
):
    sync_env(frozen_sandbox)
    config = tmp_path / "sync.toml"
    config.write_text(content)

    code = main(["sync"])

    captured = capsys.readouterr()
    assert code == 2
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"error: {config}")
    assert all(part in line for part in told), line
    assert AGENCY_KEY not in captured.out + captured.err
    # Nothing ran: the lake is untouched.
    assert not (tmp_path / "lake").exists()


def test_a_bad_settings_file_still_loads_the_code_location_and_each_run_says_why(
    frozen_sandbox, sync_env, tmp_path
):
    sync_env(frozen_sandbox)
    (tmp_path / "sync.toml").write_text("[service.comment]\nrate_windw_seconds = 2\n")

    resources = resources_or_problem()

    assert {type(r) for r in resources.values()} == {SetupProblem}
    result = dg.materialize(
        [ASSETS["workspace"]],
        resources=resources,
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_failure)
    text = str(failure.event_specific_data.error.to_string())
    assert 'has no setting "rate_windw_seconds"' in text


def test_a_key_with_a_copied_line_break_is_used_without_it_and_never_shown(
    frozen_sandbox, sync_env, tmp_path, monkeypatch, capfd, caplog
):
    sync_env(frozen_sandbox)
    canary = f"sa_live_CANARY_{uuid.uuid4().hex}"
    # The sandbox accepts the demo key only: the canary rides along in a second connection
    # whose key has the line break, so the run shows both the warning and the refusal.
    (tmp_path / "sync.toml").write_text(AGENCY.format(url=frozen_sandbox.url))
    monkeypatch.setenv("COMMENT_AUTOMATION_API_KEY", f"{COMMENT_KEY}\n")
    monkeypatch.setenv("AGENCY_KEY", f"{canary}\n")
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    shutil.copy(ROOT / "instance" / "dagster.yaml", dagster_home)  # the instance `make dev` runs
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    caplog.set_level(logging.DEBUG)

    report = run_sync(["workspace"])

    output = capfd.readouterr()
    assert landed_connections("comment/workspace") == {"default"}
    assert "AGENCY_KEY was refused" in report.failed["comment.workspace"]
    assert "AGENCY_KEY has spaces or a line break around the key" in caplog.text
    events, runs = instance_events(dagster_home)
    # In the run's event log too, so the UI shows it.
    assert any("AGENCY_KEY has spaces" in (e.message or "") for e in events)
    assert_nowhere(
        [canary, canary.removeprefix("sa_live_")],
        output=output,
        logs=pipeline_logs(caplog),
        report=str(report),
        events=events,
        runs=runs,
        files=written(tmp_path),
    )


#: Each runtime mistake of a connection, as the variables it changes ({url}: the sandbox's).
RUNTIME_MISTAKES = {
    "a wrong key": {"COMMENT_AUTOMATION_API_KEY": "{canary}"},
    "a missing key": {"COMMENT_AUTOMATION_API_KEY": None},
    "a dead address": {"COMMENT_AUTOMATION_URL": "http://127.0.0.1:9/comment/api/v1"},
    "a base URL without its version": {"COMMENT_AUTOMATION_URL": "{url}/comment/api"},
    "a key with a line break": {"COMMENT_AUTOMATION_API_KEY": "{canary}\n"},
}


@pytest.mark.parametrize("changes", RUNTIME_MISTAKES.values(), ids=RUNTIME_MISTAKES)
def test_a_canary_key_never_leaves_the_environment_whatever_goes_wrong(
    changes, frozen_sandbox, sync_env, tmp_path, monkeypatch, capfd, caplog
):
    sync_env(frozen_sandbox, sync_toml=AGENCY.format(url=frozen_sandbox.url))
    # The canary is a key of the run in every case: the failing connection's or, where
    # the mistake is not its key, the other workspace's (wrong too, so both fail).
    canary = f"sa_live_CANARY_{uuid.uuid4().hex}"
    monkeypatch.setenv("AGENCY_KEY", canary)
    for name, value in changes.items():
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value.format(canary=canary, url=frozen_sandbox.url))
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    caplog.set_level(logging.DEBUG)

    code = main(["sync", "--streams", "workspace", "channels"])

    output = capfd.readouterr()
    assert code == 1 and "FAILED comment.workspace" in output.err
    assert landed_connections("conversation/channels") == {"default", "jp"}
    events, runs = instance_events(dagster_home)
    assert_nowhere(
        [canary, canary.removeprefix("sa_live_")],
        output=output,
        logs=pipeline_logs(caplog),
        report="",
        events=events,
        runs=runs,
        files=written(tmp_path),
    )


def test_check_lists_every_connection_with_what_to_fix(
    frozen_sandbox, sync_env, monkeypatch, capsys
):
    sync_env(frozen_sandbox, sync_toml=AGENCY.format(url=frozen_sandbox.url))
    monkeypatch.setenv("AGENCY_KEY", "sa_live_wrong")
    monkeypatch.setenv("DATAHUB_JP_URL", "http://127.0.0.1:9/datahub-jp")
    monkeypatch.setenv("WEBHOOK_SECRET", "s")
    monkeypatch.setenv("AGENT_TOKEN", "agent-secret-token")
    monkeypatch.setenv("AGENT_REPLY", "string:capwords")

    code = main(["check"])

    captured = capsys.readouterr()
    assert code == 1
    rows = {tuple(line.split()[:2]): line.split()[-1] for line in captured.out.splitlines()}
    assert rows == {
        ("comment", "default"): "ok",
        ("comment", "agency"): "FAILED",
        ("conversation", "default"): "ok",
        ("conversation", "jp"): "ok",
        ("datahub", "default"): "ok",
        ("datahub", "jp"): "FAILED",
        ("datahub", "webhooks"): "ok",
        ("conversation", "agent"): "ok",
        ("lake", "LAKE_ROOT"): "ok",
        ("store", "SYNC_STORE"): "ok",
        ("alerts", "ALERT_URLS"): "ok",
    }
    assert "/agent/reply: AGENT_REPLY=string:capwords within 20 s" in captured.out
    assert "agent-secret-token" not in captured.out + captured.err
    assert "AGENCY_KEY was refused" in captured.err
    assert "nothing answers at this address" in captured.err and "DATAHUB_JP_URL" in captured.err
    assert "sa_live_wrong" not in captured.out + captured.err


def test_a_missing_webhook_secret_is_a_warning_where_every_connection_is_right(
    frozen_sandbox, sync_env, monkeypatch, capsys
):
    """Only the receiver needs the secret (it refuses to start without it). Regression: in
    `make dev`, where no receiver runs, check_setup failed with all six connections ok."""
    sync_env(frozen_sandbox)
    monkeypatch.delenv("WEBHOOK_SECRET", raising=False)
    monkeypatch.delenv("AGENT_TOKEN", raising=False)

    assert main(["check"]) == 0
    captured = capsys.readouterr()
    rows = {tuple(line.split()[:2]): line.split()[-1] for line in captured.out.splitlines()}
    assert rows.pop(("datahub", "webhooks")) == "WARN"
    assert rows.pop(("conversation", "agent")) == "WARN"
    assert "WARN conversation agent: AGENT_TOKEN is not set" in captured.err
    # 5 connections, the lake, the store, the alerts
    assert set(rows.values()) == {"ok"} and len(rows) == 8
    assert "WARN datahub webhooks: WEBHOOK_SECRET is not set" in captured.err

    result = check_setup.execute_in_process(resources=resources_or_problem())
    assert result.success
    [table] = [
        m.value
        for e in result.all_events
        if e.is_successful_output
        for m in [e.event_specific_data.metadata["connections"]]
    ]
    found = {(r.data["service"], r.data["connection"]): r.data["result"] for r in table.records}
    assert found.pop(("datahub", "webhooks")).startswith("warning: WEBHOOK_SECRET is not set")
    assert found.pop(("conversation", "agent")).startswith("warning: AGENT_TOKEN is not set")
    assert set(found.values()) == {"ok"}


@pytest.mark.parametrize(
    "env, said",
    [
        ({"AGENT_REPLY": "no_such_module:reply"}, "AGENT_REPLY='no_such_module:reply' cannot be"),
        ({"AGENT_REPLY_SECONDS": "60"}, "AGENT_REPLY_SECONDS='60': give seconds above 0"),
    ],
)
def test_a_reply_function_or_deadline_the_agent_would_refuse_fails_the_check(
    frozen_sandbox, sync_env, monkeypatch, capsys, env, said
):
    sync_env(frozen_sandbox)
    monkeypatch.setenv("AGENT_TOKEN", "agent-secret-token")
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    assert main(["check"]) == 2  # a setting to fix
    captured = capsys.readouterr()
    rows = {tuple(line.split()[:2]): line.split()[-1] for line in captured.out.splitlines()}
    assert rows[("conversation", "agent")] == "FAILED"
    assert said in captured.err and "agent-secret-token" not in captured.out + captured.err


def test_the_log_total_check_compares_the_connections_it_can_ask_and_names_the_other(
    frozen_sandbox, sync_env, monkeypatch
):
    sync_env(frozen_sandbox, sync_toml=AGENCY.format(url=frozen_sandbox.url))
    monkeypatch.setenv("AGENCY_KEY", AGENCY_KEY)
    assert run_sync(["trigger_logs"]).ok
    monkeypatch.setenv("COMMENT_AUTOMATION_API_KEY", "sa_live_wrong")
    resources = resources_or_problem()

    result = rows_equal_service_total(comment=resources["comment"], lake=resources["lake"])

    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert set(result.metadata["connections"].value) == {"agency"}
    assert "COMMENT_AUTOMATION_API_KEY was refused" in result.description


def test_the_check_setup_job_shows_every_connection_and_fails_naming_the_wrong_one(
    frozen_sandbox, sync_env, monkeypatch
):
    sync_env(frozen_sandbox, sync_toml=AGENCY.format(url=frozen_sandbox.url))
    monkeypatch.setenv("AGENCY_KEY", "sa_live_wrong")
    monkeypatch.setenv("WEBHOOK_SECRET", "s")
    monkeypatch.setenv("AGENT_TOKEN", "t")

    result = check_setup.execute_in_process(resources=resources_or_problem(), raise_on_error=False)

    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    user_failure = failure.event_specific_data.user_failure_data
    assert user_failure.description.startswith("comment connection 'agency' (")
    assert "AGENCY_KEY was refused" in user_failure.description
    rows = {
        (row.data["service"], row.data["connection"]): row.data["result"]
        for row in user_failure.metadata["connections"].records
    }
    assert len(rows) == 11 and rows.pop(("comment", "agency")) == user_failure.description
    assert set(rows.values()) == {"ok"}
    assert "sa_live_wrong" not in str(failure)

    monkeypatch.setenv("AGENCY_KEY", AGENCY_KEY)
    assert check_setup.execute_in_process(resources=resources_or_problem()).success


def test_debug_shows_the_trace_of_a_failed_connection_without_its_key(
    frozen_sandbox, sync_env, monkeypatch, capsys
):
    sync_env(frozen_sandbox)
    canary = f"sa_live_CANARY_{uuid.uuid4().hex}"
    monkeypatch.setenv("COMMENT_AUTOMATION_API_KEY", canary)

    code = main(["--debug", "sync", "--streams", "workspace"])

    err = capsys.readouterr().err
    assert code == 1 and "COMMENT_AUTOMATION_API_KEY was refused" in err
    assert "Traceback (most recent call last)" in err and "ServiceError" in err
    assert canary not in err and canary.removeprefix("sa_live_") not in err


@pytest.mark.parametrize("command", [["sync", "--streams", "workspace"], ["warehouse"]])
def test_a_view_naming_a_source_with_no_file_is_one_error_line_and_exit_2(
    frozen_sandbox, sync_env, monkeypatch, capsys, tmp_path, command
):
    """A settings mistake told as the README promises, before any work: a sync makes no
    request and writes no file. Regression: an uncaught ValueError and exit 1; then exit 2
    only after every stream had landed."""
    sync_env(frozen_sandbox)
    views = tmp_path / "mine"
    (views / "erp").mkdir(parents=True)
    (views / "erp" / "late_orders.sql").write_text("SELECT * FROM {{ source('erp', 'orders') }}")
    monkeypatch.setenv("WAREHOUSE_SQL", str(views))
    httpx.delete(f"{frozen_sandbox.url}/_sandbox/requests")

    assert main(command) == 2
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "source('erp', 'orders')" in line and "WAREHOUSE_SQL" in line
    assert "Traceback" not in err
    assert httpx.get(f"{frozen_sandbox.url}/_sandbox/requests").json()["paths"] == []
    assert list(Path(os.environ["LAKE_ROOT"]).rglob("*.parquet")) == []


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE VIEW mine.broken AS SELECT nosuchcolumn FROM {{ source('comment', 'accounts') }}",
        "CREATE VIEW mine.broken AS SELEC 1",
        "CREATE VIEW mine.broken AS SELECT * FROM mine.nosuchview",
    ],
)
def test_a_view_duckdb_cannot_make_is_one_error_line_naming_its_file(
    frozen_sandbox, sync_env, monkeypatch, capsys, tmp_path, sql
):
    """Regression: a BinderException and its traceback, exit 1. The views already built
    stay as they were."""
    sync_env(frozen_sandbox)
    assert main(["sync", "--streams", "accounts"]) == 0
    views = tmp_path / "mine"
    (views / "mine").mkdir(parents=True)
    (views / "mine" / "broken.sql").write_text(sql)
    monkeypatch.setenv("WAREHOUSE_SQL", str(views))
    capsys.readouterr()

    assert main(["warehouse"]) == 2
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert f"error: {views / 'mine' / 'broken.sql'}: " in line and "Correct the view" in line
    assert "Traceback" not in err
    with duckdb.connect(os.environ["WAREHOUSE_PATH"], read_only=True) as con:
        assert con.execute("SELECT count(*) FROM comment.accounts").fetchone()[0] > 0


@pytest.mark.parametrize(
    "variable", ["LAKE_ROOT", "WAREHOUSE_PATH", "COMMENT_AUTOMATION_URL", "SYNC_STORE"]
)
def test_a_key_put_where_a_path_or_an_address_belongs_is_refused_unseen(
    frozen_sandbox, sync_env, monkeypatch, capsys, tmp_path, variable
):
    """Regression: a key pasted into LAKE_ROOT became a folder, named in the views' SQL."""
    sync_env(frozen_sandbox)
    canary = f"sa_live_CANARY_{uuid.uuid4().hex}"
    monkeypatch.setenv(variable, canary)

    assert main(["sync", "--streams", "workspace"]) == 2
    captured = capsys.readouterr()
    [line] = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert variable in line and "looks like a comment automation key" in line
    assert canary.removeprefix("sa_live_") not in captured.out + captured.err
    assert not [path for path in tmp_path.rglob("*") if "CANARY" in path.name]


COMMANDS = {
    "check": ["check"],
    "sync": ["sync", "--streams", "workspace"],
    "push": ["push"],
    "push --dry-run": ["push", "--dry-run"],
    "warehouse": ["warehouse"],
}


@pytest.mark.parametrize("under", [False, True], ids=["a file", "a path under a file"])
@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS)
def test_a_lake_root_that_is_a_file_is_one_line_naming_it_and_exit_2(
    frozen_sandbox, sync_env, monkeypatch, capsys, tmp_path, command, under
):
    """Regression: `sync` ended in a NotADirectoryError traceback, `warehouse` rebuilt every
    view over nothing and exited 0, `push --dry-run` blamed a view."""
    sync_env(frozen_sandbox)
    file = tmp_path / "lake.txt"
    file.write_text("not a lake")
    monkeypatch.setenv("LAKE_ROOT", str(file / "lake" if under else file))
    warehouse = Path(os.environ["WAREHOUSE_PATH"])
    warehouse.write_bytes(b"an analyst's warehouse")
    before = warehouse.stat().st_mtime_ns

    assert main(command) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    [line] = [line for line in captured.err.splitlines() if "LAKE_ROOT" in line]
    assert f"{file} is a file, not a folder; set LAKE_ROOT to a folder" in line
    if command != ["check"]:  # the check shows its other rows
        assert captured.err.strip() == line
    assert warehouse.read_bytes() == b"an analyst's warehouse"
    assert warehouse.stat().st_mtime_ns == before
    assert sorted(p.name for p in warehouse.parent.iterdir()) == sorted(
        ["lake.txt", "sync.toml", warehouse.name]
    )
