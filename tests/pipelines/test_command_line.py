"""The command line as a new user meets it: each command's `--help` says what it does and what
each option means; a usage mistake is one line and exit 2 before any Dagster run starts, with
the closest names; a run prints the product's lines, not Dagster's, and says each failure
once; `--streams` selects the receivers' relations too, and a service all of its own."""

import logging
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import duckdb
import pytest

from assets import sync
from assets.console import RECORD_METADATA, own_lines_logger
from cli.main import main, record_types
from pipelines.agent.inbox import open_agent_inbox
from pipelines.agent.reply import Answer
from pipelines.agent.request import request_key
from pipelines.push.run import ORDER
from pipelines.registry import PULLED
from pipelines.settings import ENVIRONMENT_CONNECTIONS, load_settings
from pipelines.sync import RECEIVERS, select_streams
from pipelines.webhooks.inbox import Inbox
from tests.agent.conftest import body_of, message, turn
from tests.webhooks.test_compaction import DAYS, store

#: What marks a line of Dagster's own console.
DAGSTER_LINE = " - dagster - "


@pytest.fixture
def no_services(tmp_path, monkeypatch):
    """A lake and a warehouse of the test's, and no service set."""
    for entries in ENVIRONMENT_CONNECTIONS.values():
        for _, url_variable, _ in entries:
            monkeypatch.delenv(url_variable, raising=False)
    for name in ("WEBHOOK_INBOX", "AGENT_INBOX", "SYNC_STORE", "SYNC_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("LAKE_ROOT", str(tmp_path / "lake"))
    monkeypatch.setenv("WAREHOUSE_PATH", str(tmp_path / "warehouse.duckdb"))
    (tmp_path / "sync.toml").write_text("")
    monkeypatch.setenv("SYNC_CONFIG", str(tmp_path / "sync.toml"))
    return tmp_path


@pytest.fixture
def no_run(monkeypatch):
    """Fails the test where a command starts a Dagster run: every run of `sync` and `push`
    is in the instance `dagster_instance` gives."""

    def started():
        raise AssertionError("a Dagster run was started")

    monkeypatch.setattr(sync, "dagster_instance", started)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["sync", "--streams", "triger_logs"],
            "no stream is named 'triger_logs' (did you mean trigger_logs or comment.trigger_logs?)",
        ),
        (["sync", "--streams", "comment", "agent_request"], "(did you mean agent_requests"),
        (["push", "--types", "orders"], "no record type is named 'orders' (did you mean order?)"),
        (
            ["sync", "--start", "2026-03-01", "--end", "2026-02-01"],
            "--start 2026-03-01 is after --end 2026-02-01",
        ),
        (["sync", "--start", "2026-02-31"], "expected a day as YYYY-MM-DD (e.g. 2026-02-28), got"),
        (["sync", "--days", "3"], "unrecognized arguments: --days 3"),
        (["pull"], "invalid choice: 'pull'"),
    ],
)
def test_a_usage_mistake_is_one_line_and_exit_2_before_any_run(
    no_services, no_run, capsys, argv, said
):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    assert exited.value.code == 2
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and said in err, err
    assert "--help` says more" in err


@pytest.mark.parametrize(
    ("command", "says", "options"),
    [
        (None, "Keeps a DuckDB warehouse in sync", ["--debug", "check", "sync", "push"]),
        ("check", "one cheap call per connection", []),
        (
            "sync",
            "Pull the services' streams into the lake",
            ["--streams", "--start", "--end", "conversation.agent_requests"],
        ),
        ("push", "Send what changed in your outbound views", ["--dry-run", "--types", "--resend"]),
        ("warehouse", "Rebuild the warehouse's views", []),
    ],
)
def test_each_command_says_what_it_does_and_what_each_option_means(capsys, command, says, options):
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"] if command else ["--help"])
    text = " ".join(capsys.readouterr().out.split())  # as one line, however it wraps
    assert exited.value.code == 0
    assert says in text and "exit codes: 0 everything ran" in text, text
    for option in options:
        assert option in text
    # Every option has its own words, none describes the code ("imports", "module").
    assert "imports what it runs" not in text and "assets/" not in text


@pytest.mark.parametrize(
    ("step", "says"),
    [("plan", "Writes nothing"), ("apply", "a read-only key is refused with 403")],
)
def test_each_activities_step_says_what_it_does(capsys, step, says):
    with pytest.raises(SystemExit) as exited:
        main(["activities", step, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert exited.value.code == 0 and "ACTIVITIES_DIR" in text and says in text, text


def test_the_sync_help_keeps_the_relations_apart_from_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["sync", "--help"])
    out = capsys.readouterr().out
    relations, codes = out.split("relations --streams knows:\n")[1].split("\n\nexit codes:")
    assert "datahub.broadcast_reports" in relations and " 0 everything ran" in codes


def test_push_types_lists_the_record_types_the_push_sends_in_its_order():
    assert record_types() == ORDER


def test_the_command_line_loads_neither_the_push_run_nor_dagster_until_a_command_needs_it():
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, cli.main; "
            "print(*sorted({'pipelines.push.run', 'dagster', 'assets'} & set(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.split() == []


def test_a_service_selects_every_relation_of_it_the_receivers_too():
    pulled, received = select_streams(["conversation"])
    conversation = {s.relation for s in PULLED if s.service == "conversation"}
    assert {s.relation for s in pulled} == conversation
    assert [r.label for r in received] == [
        "conversation.agent_requests, conversation.agent_messages"
    ]
    pulled, received = select_streams(["datahub.webhook_quarantine", "agent_messages"])
    assert pulled == [] and received == RECEIVERS


def test_a_sync_of_the_receivers_relations_compacts_their_inboxes(no_services, capsys):
    lake = no_services / "lake"
    with Inbox(no_services / "webhooks" / "inbox.sqlite3") as inbox:
        events = store(inbox, DAYS[0], 2) + store(inbox, DAYS[2], 3)
    noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    document = turn(1, [message(1, "Where is my order?"), message(2, "Hello?")])
    with open_agent_inbox(str(lake)) as agent_inbox:
        agent_inbox.store(request_key(document), noon - timedelta(days=1), body_of(document))
        agent_inbox.store_answer(request_key(document), Answer("On its way.", "replied"), noon)

    code = main(["sync", "--streams", "datahub.webhook_events", "conversation.agent_messages"])

    out, err = capsys.readouterr()
    assert code == 0, err
    with duckdb.connect(str(no_services / "warehouse.duckdb"), read_only=True) as con:
        keys = con.sql("SELECT idempotency_key FROM datahub.webhook_events").fetchall()
        replies = con.sql("SELECT reply_text FROM conversation.agent_requests").fetchall()
    assert sorted(key for (key,) in keys) == sorted(events)
    assert replies == [("On its way.",)]
    # The table shows the relations synced, and how many rows each holds now.
    table = dict(line.split() for line in out.splitlines()[-5:])
    assert table == {
        "relation": "rows",
        "datahub.webhook_events": "5",
        "datahub.webhook_quarantine": "0",
        "conversation.agent_requests": "1",
        "conversation.agent_messages": "2",
    }
    # The sync rebuilt the views once, after its landings, and says so.
    assert "(views rewritten)" in out and "views up to date" not in out + err
    assert "datahub.webhook_events: 5 rows over 2 day(s) rewritten" in err
    assert DAGSTER_LINE not in out + err


def test_a_missing_key_is_said_once_in_the_products_words(
    frozen_sandbox, sync_env, monkeypatch, capsys
):
    sync_env(frozen_sandbox)
    monkeypatch.delenv("COMMENT_AUTOMATION_API_KEY")

    code = main(["sync", "--streams", "workspace"])

    out, err = capsys.readouterr()
    assert code == 1
    assert (out + err).count("COMMENT_AUTOMATION_API_KEY") == 1, err
    assert "is not set or empty: set it to this connection's key" in err
    assert DAGSTER_LINE not in out + err and "Not executing" not in err
    assert "RUN_FAILURE" not in err and "STEP_FAILURE" not in err
    # The rows of what it synced, not of every relation.
    assert [line.split()[0] for line in out.splitlines()[-2:]] == ["relation", "comment.workspace"]


def test_debug_shows_dagsters_own_lines_where_the_sync_runs_in_dagster(
    frozen_sandbox, sync_env, capsys, tmp_path, monkeypatch
):
    sync_env(frozen_sandbox)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    assert main(["sync", "--streams", "channels", "--debug"]) == 0  # after the command too
    err = capsys.readouterr().err
    assert DAGSTER_LINE in err and "STEP_START" in err


def test_without_dagster_home_a_sync_lands_in_this_process_with_no_dagster_run(
    frozen_sandbox, sync_env, capsys, no_run, monkeypatch
):
    """No instance kept, no Dagster run: the core lands each stream, the lake equals the
    service, and `sync.runs` says the command line started it."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    sync_env(frozen_sandbox)
    assert main(["sync", "--streams", "channels", "daily_stats"]) == 0
    out, err = capsys.readouterr()
    assert DAGSTER_LINE not in err and "conversation.channels [default]: " in err
    settings = load_settings()
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        channels = con.execute("SELECT count(*) FROM conversation.channels").fetchall()[0][0]
        started = con.execute(
            "SELECT DISTINCT relation, started_by, outcome FROM sync.runs ORDER BY relation"
        ).fetchall()
    truth = frozen_sandbox.truth()["conversation"]
    assert channels == sum(region["channels"] for region in truth.values()) > 0
    assert started == [
        ("comment.daily_stats", "command line", "succeeded"),
        ("conversation.channels", "command line", "succeeded"),
    ]


def log_as_dagster(logger: logging.Logger, level: int, message: str, event=None) -> None:
    """Log as Dagster does to a run's loggers: the message prefixed, what it knows of it
    under `dagster_meta` (`dagster._core.log_manager`, `DagsterLogHandler.emit`)."""
    meta = {"dagster_event": event, "orig_message": message}
    prefixed = f"sync_comment_workspace - 1234 - comment__workspace - {message}"
    logger.log(level, prefixed, extra={RECORD_METADATA: meta})


def event(step_failure: bool = False, run_failure: bool = False) -> SimpleNamespace:
    return SimpleNamespace(is_step_failure=step_failure, is_run_failure=run_failure)


@pytest.mark.parametrize(
    ("level", "printed"),
    [
        ("INFO", ["comment.workspace [default]: 1 rows", "a warning of ours", "ENGINE_EVENT"]),
        ("WARNING", ["a warning of ours", "ENGINE_EVENT"]),
    ],
)
def test_the_command_lines_console_prints_the_products_lines_alone(capsys, level, printed):
    logger = own_lines_logger(level)
    for record in [
        (logging.INFO, "comment.workspace [default]: 1 rows"),
        (logging.WARNING, "a warning of ours"),
        (logging.DEBUG, "STEP_START - Started execution", event()),
        (logging.INFO, "STEP_SUCCESS - Finished", event()),
        (logging.ERROR, "STEP_FAILURE - told by the command", event(True)),
        (logging.ERROR, "RUN_FAILURE - told by the command", event(False, True)),
        (logging.ERROR, "Dependencies for step a failed: ['b']. Not executing."),
        (logging.WARNING, "ENGINE_EVENT", event()),
    ]:
        log_as_dagster(logger, *record)
    lines = capsys.readouterr().err.splitlines()
    # Ours as the message alone; Dagster's own events only from WARNING, with its prefix.
    assert [line.rpartition(" - ")[2] for line in lines] == printed
    assert all(" - " not in line for line in lines if "ENGINE_EVENT" not in line)
