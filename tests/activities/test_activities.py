"""`python -m cli activities plan|apply` against one live sandbox, checked against its
ground truth (`/_sandbox/truth/comment/{workspace}/activities/rows`, `/_sandbox/requests`).

Each test has its own folder, lake and activity names; the sandbox is the module's."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import httpx
import pytest

from assets.activities import activities
from assets.resources import build_resources
from cli.main import main
from pipelines.errors import Unavailable
from pipelines.settings import load_settings
from tests.constants import COMMENT, READWRITE
from tests.pipelines.conftest import LiveSandbox, start_sandbox  # noqa: F401
from tests.pipelines.test_progress_display import CONTROL, environment, held, on_a_terminal

WRITES = ("POST", "PATCH", "DELETE")


@pytest.fixture(scope="module")
def sandbox(start_sandbox) -> LiveSandbox:  # noqa: F811 (the fixture imported above)
    return start_sandbox()


@pytest.fixture(scope="module")
def service(sandbox) -> dict:
    """The demo workspace's id, an Instagram account and one of its posts."""
    api = f"{sandbox.url}{COMMENT}"
    workspace = httpx.get(f"{api}/me", headers=READWRITE).json()["workspace"]["id"]
    accounts = httpx.get(f"{api}/accounts", headers=READWRITE).json()["accounts"]
    instagram = next(a for a in accounts if a["platform"] == "instagram")
    posts = httpx.get(f"{api}/accounts/{instagram['id']}/posts", headers=READWRITE).json()
    return {"workspace": workspace, "instagram": instagram["id"], "post": posts["posts"][0]}


@pytest.fixture
def folder(tmp_path, monkeypatch, sandbox) -> Path:
    """The environment a user sets: the sandbox's comment connection with a read+write key,
    a lake of the test's own, ACTIVITIES_DIR."""
    for name in ("CONVERSATION_URL", "CONVERSATION_JP_URL", "DATAHUB_URL", "DATAHUB_JP_URL"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "sync.toml").write_text("[service.comment]\npace = false\n")
    activities_dir = tmp_path / "activities"
    activities_dir.mkdir()
    for name, value in {
        "COMMENT_AUTOMATION_URL": f"{sandbox.url}{COMMENT}",
        "COMMENT_AUTOMATION_API_KEY": "sa_live_demo_readwrite",
        "LAKE_ROOT": str(tmp_path / "lake"),
        "WAREHOUSE_PATH": str(tmp_path / "warehouse.duckdb"),
        "SYNC_CONFIG": str(tmp_path / "sync.toml"),
        "ACTIVITIES_DIR": str(activities_dir),
    }.items():
        monkeypatch.setenv(name, value)
    return activities_dir


@pytest.fixture
def run(capsys) -> Callable[..., tuple[int, str, str]]:
    def command(*args: str) -> tuple[int, str, str]:
        code = main(["activities", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return command


def rows(sandbox: LiveSandbox, workspace: str) -> dict[str, dict]:
    """The service's activities now, by name (the names the tests use are their own)."""
    answer = httpx.get(f"{sandbox.url}/_sandbox/truth/comment/{workspace}/activities/rows")
    return {row["name"]: row for row in answer.json()["rows"]}


def writes(sandbox: LiveSandbox) -> int:
    paths = httpx.get(f"{sandbox.url}/_sandbox/requests").json()["paths"]
    return sum(p["count"] for p in paths if p["method"] in WRITES)


def log_files(folder: Path) -> list[Path]:
    return sorted((folder.parent / "lake" / "sync" / "activity_changes").glob("*.parquet"))


def declare(folder: Path, stem: str, text: str) -> Path:
    path = folder / f"{stem}.toml"
    path.write_text(text)
    return path


def spring(service: dict, name: str, extra: str = "") -> str:
    """An activity using most input fields, one post given by its URL (the service keeps
    the post's id)."""
    return f"""
name = "{name}"
account_id = "{service["instagram"]}"
trigger = "ig_comment"
keywords = ["price", "link"]
match = "exact"
public_replies = ["Sent you a DM!"]
post_scope = "selected"
post_ids = ["{service["post"]["permalink"]}"]
start_at = 2026-12-01T09:00:00+09:00
{extra}
[follow_gate]
enabled = true
button_title = "Follow us"

[[dm]]
type = "text"
text = "Here is the link"

[[dm]]
type = "button"
title = "Shop now"
url = "https://shop.example/p/1"
"""


def test_plan_lists_creates_per_connection_and_writes_nothing(
    sandbox, service, folder, run, monkeypatch
):
    agency_key = {"Authorization": "Bearer sa_live_agency_readwrite"}
    accounts = httpx.get(f"{sandbox.url}{COMMENT}/accounts", headers=agency_key).json()
    agency = next(a["id"] for a in accounts["accounts"] if a["platform"] == "facebook")
    monkeypatch.setenv("AGENCY_KEY", "sa_live_agency_readwrite")
    config = folder.parent / "sync.toml"
    config.write_text(
        f'[[connections.comment]]\nname = "agency"\nbase_url = "{sandbox.url}{COMMENT}"\n'
        f'api_key_env = "AGENCY_KEY"\n\n{config.read_text()}'
    )
    declare(
        folder,
        "agency",
        f'name = "plan agency"\nconnection = "agency"\naccount_id = "{agency}"\n'
        'trigger = "fb_message"\n',
    )
    declare(folder, "spring", spring(service, "plan spring"))
    declare(
        folder,
        "welcome",
        f'name = "plan welcome"\naccount_id = "{service["instagram"]}"\ntrigger = "ig_story"\n',
    )
    before, written = rows(sandbox, service["workspace"]), writes(sandbox)

    code, out, _ = run("plan")

    assert code == 0
    assert (
        out.index("connection agency") < out.index("plan agency") < out.index("connection default")
    )
    assert f"create   'plan spring'  ({folder / 'spring.toml'})" in out
    assert f"create   'plan welcome'  ({folder / 'welcome.toml'})" in out
    assert rows(sandbox, service["workspace"]) == before
    assert writes(sandbox) == written
    assert log_files(folder) == []


def test_apply_creates_drafts_then_writes_nothing_and_the_log_is_a_view(
    sandbox, service, folder, run
):
    declare(folder, "spring", spring(service, "apply spring"))
    others = rows(sandbox, service["workspace"])

    code, out, _ = run("apply", "--by", "ana")

    assert code == 0, out
    held = rows(sandbox, service["workspace"])
    made = held.pop("apply spring")
    assert held == others  # the activities no file names are left alone
    assert made["status"] == "draft"
    assert made["account_id"] == service["instagram"] and made["trigger"] == "ig_comment"
    assert made["keywords"] == ["price", "link"] and made["match"] == "exact"
    assert made["public_replies"] == ["Sent you a DM!"]
    assert made["dm"] == [
        {"type": "text", "text": "Here is the link"},
        {"type": "button", "title": "Shop now", "url": "https://shop.example/p/1"},
    ]
    assert made["post_scope"] == "selected" and made["post_ids"] == [service["post"]["id"]]
    assert made["follow_gate"]["enabled"] is True
    assert made["follow_gate"]["button_title"] == "Follow us"
    assert made["start_at"] == "2026-12-01T00:00:00+00:00"
    assert "applied 1 change(s)" in out

    written, files = writes(sandbox), log_files(folder)
    code, out, _ = run("apply", "--by", "ana")
    assert code == 0
    assert "nothing to apply" in out
    assert writes(sandbox) == written
    assert log_files(folder) == files
    assert rows(sandbox, service["workspace"])["apply spring"] == made

    with duckdb.connect(str(folder.parent / "warehouse.duckdb"), read_only=True) as con:
        logged = con.execute(
            "SELECT name, activity_id, action, applied_by, before, after, drift "
            "FROM sync.activity_changes"
        ).fetchall()
    assert len(logged) == 1
    name, activity_id, action, by, before, after, drift = logged[0]
    assert (name, activity_id, action, by, before, drift) == (
        "apply spring",
        made["id"],
        "create",
        "ana",
        None,
        None,
    )
    assert json.loads(after)["post_ids"] == [service["post"]["id"]]


def test_an_edit_at_the_service_is_drift_and_apply_puts_the_file_back(
    sandbox, service, folder, run
):
    declare(folder, "spring", spring(service, "drift spring"))
    assert run("apply")[0] == 0
    made = rows(sandbox, service["workspace"])["drift spring"]
    httpx.patch(  # the dashboard
        f"{sandbox.url}{COMMENT}/activities/{made['id']}",
        headers=READWRITE,
        json={"keywords": ["free"], "match": "contains"},
    ).raise_for_status()

    code, out, _ = run("plan")

    assert code == 0
    assert "drift    'drift spring' changed at the service: keywords, match" in out
    assert "update   'drift spring': keywords, match" in out

    assert run("apply")[0] == 0
    again = rows(sandbox, service["workspace"])["drift spring"]
    assert again["keywords"] == ["price", "link"] and again["match"] == "exact"
    with duckdb.connect(str(folder.parent / "warehouse.duckdb"), read_only=True) as con:
        [(drift,)] = con.execute(
            "SELECT drift FROM sync.activity_changes WHERE action = 'update'"
        ).fetchall()
    assert json.loads(drift) == ["keywords", "match"]

    httpx.delete(f"{sandbox.url}{COMMENT}/activities/{made['id']}", headers=READWRITE)
    code, out, _ = run("plan")
    assert "drift    'drift spring' deleted at the service since the last apply" in out
    assert "create   'drift spring'" in out


def test_a_dashboard_activity_is_taken_over_by_name_and_an_undeclared_one_left_alone(
    sandbox, service, folder, run
):
    api = f"{sandbox.url}{COMMENT}/activities"
    body = {"account_id": service["instagram"], "trigger": "ig_comment", "name": "taken over"}
    made = httpx.post(api, headers=READWRITE, json=body | {"keywords": ["old"]}).json()
    path = declare(folder, "taken", spring(service, "taken over"))

    code, out, _ = run("apply")

    assert code == 0
    assert "update   'taken over': keywords, match, public_replies, dm, post_scope" in out
    assert rows(sandbox, service["workspace"])["taken over"]["id"] == made["id"]
    assert rows(sandbox, service["workspace"])["taken over"]["keywords"] == ["price", "link"]

    path.unlink()
    written = writes(sandbox)
    code, out, _ = run("apply")
    assert code == 0
    assert "left     'taken over': applied before, no file names it now; left alone" in out
    assert writes(sandbox) == written
    assert "taken over" in rows(sandbox, service["workspace"])

    twin = httpx.post(api, headers=READWRITE, json=body).json()
    declare(folder, "taken", spring(service, "taken over"))
    httpx.delete(f"{api}/{made['id']}", headers=READWRITE)  # the managed one: by name again
    httpx.post(api, headers=READWRITE, json=body)
    code, _, err = run("plan")
    assert code == 2
    assert err.startswith(f"error: {path}: name: 2 activities at the service are named")
    assert twin["id"] in err


def test_activating_and_deleting_each_need_their_flag(sandbox, service, folder, run):
    path = declare(folder, "live", spring(service, "flag live", 'status = "active"'))
    written = writes(sandbox)

    code, _, err = run("apply")

    assert code == 2
    assert err.splitlines() == [
        f"error: {path}: create of 'flag live' in connection 'default' makes it active: the "
        "account replies to real people; pass --allow-activate to allow it"
    ]
    assert writes(sandbox) == written
    assert "flag live" not in rows(sandbox, service["workspace"])
    code, out, _ = run("plan")
    assert f"create   'flag live'  ({path})  needs --allow-activate" in out

    assert run("apply", "--allow-activate")[0] == 0
    made = rows(sandbox, service["workspace"])["flag live"]
    assert made["status"] == "active"

    declare(folder, "live", spring(service, "flag live", 'status = "paused"'))
    code, out, _ = run("apply")
    assert code == 0 and "pause    'flag live': status" in out
    assert rows(sandbox, service["workspace"])["flag live"]["status"] == "paused"

    declare(folder, "live", 'name = "flag live"\ndelete = true\n')
    written = writes(sandbox)
    code, _, err = run("apply")
    assert code == 2
    assert err.splitlines() == [
        f"error: {path}: delete of 'flag live' in connection 'default' deletes it and its "
        "trigger logs at the service; pass --allow-delete to allow it"
    ]
    assert writes(sandbox) == written
    assert run("apply", "--allow-delete")[0] == 0
    assert "flag live" not in rows(sandbox, service["workspace"])
    assert made["id"] not in {r["id"] for r in rows(sandbox, service["workspace"]).values()}
    code, out, _ = run("plan")
    assert code == 0 and "no changes" in out


@pytest.mark.parametrize(
    ("trigger", "text", "told"),
    [
        (
            "ig_comment",
            '[[dm]]\ntype = "button"\ntitle = "A label far over twenty"\nurl = "https://x.io"\n',
            "dm.0.title: a button label is at most 20 characters",
        ),
        (
            "ig_comment",
            'kewords = ["price"]\n',
            'kewords: unknown field (did you mean "keywords"?)',
        ),
        ("ig_live", 'post_scope = "next_post"\n', "post_scope: next_post is for ig_comment only"),
        ("ig_comment", "end_at = 2026-01-01T00:00:00\n", "end_at: needs a timezone"),
        ("ig_story", 'public_replies = ["hi"]\n', "public_replies: public replies are unavailable"),
        ("ig_comment", 'status = "live"\n', "status: Input should be 'draft', 'active' or"),
    ],
)
def test_an_invalid_file_is_one_line_naming_the_file_and_the_field(
    sandbox, service, folder, run, trigger, text, told
):
    account = service["instagram"]
    body = f'name = "bad"\naccount_id = "{account}"\ntrigger = "{trigger}"\n{text}'
    path = declare(folder, "bad", body)
    written = writes(sandbox)

    code, _, err = run("apply")

    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith(f"error: {path}: {told}")
    assert writes(sandbox) == written


def test_a_name_twice_in_a_connection_and_an_unknown_connection_are_refused(
    folder, run, monkeypatch
):
    declare(folder, "a", 'name = "twice"\ndelete = true\n')
    second = declare(folder, "b", 'name = "twice"\ndelete = true\n')
    code, _, err = run("plan")
    assert code == 2
    assert err == (
        f"error: {second}: name: 'twice' is also declared by {folder / 'a.toml'} in "
        "connection 'default'; a name is an activity's identity, give each its own\n"
    )
    second.unlink()
    other = declare(folder, "c", 'name = "elsewhere"\nconnection = "agncy"\ndelete = true\n')
    code, _, err = run("plan")
    assert code == 2
    assert err == (
        f"error: {other}: connection: no comment connection 'agncy' is set; set: default; "
        'a `[[connections.comment]]` entry with name = "agncy" in the settings file '
        "(sync.toml, or the file SYNC_CONFIG names) sets it (docs/settings.md)\n"
    )
    other.unlink()
    monkeypatch.delenv("COMMENT_AUTOMATION_URL")  # the default connection unset
    code, _, err = run("plan")
    assert code == 2
    assert err == (
        f"error: {folder / 'a.toml'}: connection: no comment connection 'default' is set; "
        "set: none; COMMENT_AUTOMATION_URL and COMMENT_AUTOMATION_API_KEY set it "
        "(docs/settings.md)\n"
    )


def test_a_service_that_cannot_be_reached_is_one_line_naming_its_setting(folder, run, monkeypatch):
    with socket.socket() as closed:  # a port nothing listens on once the socket is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("COMMENT_AUTOMATION_URL", f"http://127.0.0.1:{port}/api/v1")
    declare(folder, "a", 'name = "unreachable"\ndelete = true\n')
    code, _, err = run("plan")
    assert code == Unavailable.exit_code
    assert err.startswith("error: comment connection 'default' (http://127.0.0.1:")
    assert "nothing answers at this address" in err and "COMMENT_AUTOMATION_URL" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_change_the_service_refuses_stops_the_apply_and_what_was_done_is_logged(
    sandbox, service, folder, run
):
    declare(folder, "a", spring(service, "refused first"))
    bad = spring(service, "refused second").replace(
        service["post"]["permalink"], "https://www.instagram.com/p/not-a-post/"
    )
    declare(folder, "b", bad)

    code, _, err = run("apply")

    assert code == 1
    # The change made, said as it was made, then the failure, in one line.
    *made, error = err.splitlines()
    assert made == ["applied 1/2 in connection default: create 'refused first'"]
    assert error.startswith(
        "error: POST /activities answered 400 invalid_request (field post_ids.0)"
    )
    assert error.endswith(
        f"; refused: the create of 'refused second' in connection 'default', declared by "
        f"{folder / 'b.toml'}: correct it there"
    )
    held = rows(sandbox, service["workspace"])
    assert "refused first" in held and "refused second" not in held
    assert len(log_files(folder)) == 1  # the create that was made
    code, out, _ = run("plan")
    assert "create   'refused second'" in out and "'refused first'" not in out


def test_a_damaged_apply_log_is_refused_naming_the_file(folder, run, capsys):
    damaged = folder.parent / "lake" / "sync" / "activity_changes" / "20261101000000-x.parquet"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"PAR1 not a parquet file")
    code, _, err = run("plan")
    assert code == 4
    assert err.startswith(f"error: {damaged} of the activities' apply log cannot be read")
    assert damaged.exists()
    # The warehouse's view of the log fails on it: refused naming it, not set aside.
    code = main(["warehouse"])
    _, err = capsys.readouterr()
    assert code == 4
    assert f"{damaged} of the activities' apply log cannot be read" in err
    assert damaged.exists()


def test_a_trigger_the_account_does_not_support_is_refused_before_any_write(
    sandbox, service, folder, run
):
    path = declare(
        folder,
        "fb",
        f'name = "wrong trigger"\naccount_id = "{service["instagram"]}"\ntrigger = "fb_comment"\n',
    )
    code, _, err = run("plan")
    assert code == 2
    assert err.startswith(f"error: {path}: trigger: fb_comment is not supported by the instagram")


def test_the_dagster_job_plans_by_default_and_applies_when_told(sandbox, service, folder):
    declare(folder, "job", spring(service, "job spring"))
    resources = build_resources(load_settings())
    written = writes(sandbox)
    result = activities.execute_in_process(resources=resources)
    assert result.success
    assert result.output_for_node("activities_plan_or_apply") == {"create": 1, "applied": 0}
    assert writes(sandbox) == written

    config = {"apply": True, "by": "ops"}
    result = activities.execute_in_process(
        resources=resources, run_config={"ops": {"activities_plan_or_apply": {"config": config}}}
    )
    assert result.success
    assert result.output_for_node("activities_plan_or_apply") == {"create": 1, "applied": 1}
    assert rows(sandbox, service["workspace"])["job spring"]["status"] == "draft"
    with duckdb.connect(str(folder.parent / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT applied_by FROM sync.activity_changes").fetchall() == [("ops",)]


def test_a_warehouse_that_cannot_be_refreshed_after_an_apply_is_reported_not_failed(
    sandbox, service, folder, run, monkeypatch
):
    declare(folder, "a", spring(service, "refresh fails"))
    monkeypatch.setenv("WAREHOUSE_PATH", str(folder))  # a folder: no DuckDB file can be there
    code, out, _ = run("apply")
    assert code == 0
    assert "applied 1 change(s)" in out
    warehouse = out.splitlines()[-1]
    assert warehouse.startswith("warehouse: ") and str(folder) in warehouse
    assert "refresh fails" in rows(sandbox, service["workspace"])


def test_an_apply_with_a_read_only_key_is_one_line_naming_the_key(
    sandbox, service, folder, run, monkeypatch
):
    """As with the demo's settings (docs/activities.md says which key writes)."""
    monkeypatch.setenv("COMMENT_AUTOMATION_API_KEY", "sa_live_demo_readonly")
    declare(folder, "a", spring(service, "read only"))
    before = writes(sandbox)

    code, _, err = run("apply")

    assert code != 0 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "COMMENT_AUTOMATION_API_KEY" in err and "403" in err, err
    assert "sa_live_demo_readonly" not in err
    assert "read only" not in rows(sandbox, service["workspace"])
    assert writes(sandbox) - before <= 1  # the refused create, if anything


def test_an_apply_on_a_terminal_shows_each_connection_live_and_in_a_pipe_a_line_per_change(
    sandbox, service, folder
):
    """On a terminal, a live row per connection (`cli/live.py`, `apply_table`): the
    changes made of those planned, requests, time, the change being made; the sandbox holds
    the second create until the test has seen the first made. In a pipe, a line per change
    as it is made, and no control sequence."""
    for name in ("live first", "live second"):
        declare(folder, name.replace(" ", "_"), spring(service, name))
    command = [sys.executable, "-m", "cli", "activities", "apply"]
    before = writes(sandbox)
    making = re.compile(r"default\s+applying\s+1/2\s+\d+\s+\S+ \S+\s+create 'live second'")
    seen: list[str] = []

    with held(sandbox, f"{COMMENT}/activities", after=1) as release:

        def watch(written: str) -> None:
            if not seen and making.search(CONTROL.sub("", written)):
                seen.append(written)
                release.set()

        code, screen = on_a_terminal(command, watch)

    assert code == 0, screen
    assert seen, screen  # the first made, the second under way
    plain = CONTROL.sub("", screen)
    assert re.search(r"connection\s+phase\s+applied\s+requests\s+time\s+change", plain), plain
    finals = re.findall(
        r"default\s+done\s+2/2\s+(\d+)\s+done in \S+ \S+\s+create 'live second'", plain
    )
    assert finals and int(finals[-1]) == writes(sandbox) - before == 2
    assert plain.rindex("done in") < plain.index("applied 2 change(s)")
    assert {"live first", "live second"} <= rows(sandbox, service["workspace"]).keys()

    for name in ("live first", "live second"):
        declare(folder, name.replace(" ", "_"), f'name = "{name}"\ndelete = true\n')
    done = subprocess.run(
        [*command, "--allow-delete"], capture_output=True, text=True, env=environment(), timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "applied 1/2 in connection default: delete 'live first'",
        "applied 2/2 in connection default: delete 'live second'",
    ]
    assert not {"live first", "live second"} & rows(sandbox, service["workspace"]).keys()
