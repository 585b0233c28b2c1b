"""Schema drift on demand (sandbox/drift.py): each kind of change on JSON and CSV streams,
before and after the drift moment, what the ground truth counts, and readable errors."""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from datetime import timedelta

import httpx
import pytest
from starlette.testclient import TestClient

from sandbox.__main__ import parse_args
from sandbox.context import MOUNTS
from sandbox.drift import STREAMS, CsvDrift, DriftSpec, added_value
from sandbox.process import running_sandbox
from tests.conftest import ANCHOR
from tests.constants import APIKEY, COMMENT, READONLY
from tests.sandbox.test_odd_text import wait
from tests.sandbox.test_server import _free_port

HOUR = 3600
LATER = ANCHOR + timedelta(seconds=HOUR)  # the drift moment of most tests: an hour on


def csv_rows(answer: httpx.Response) -> tuple[list[str], list[dict]]:
    assert answer.status_code == 200, answer.text
    reader = csv.reader(io.StringIO(answer.content.decode("utf-8"), newline=""))
    header = next(reader)
    rows = [dict(zip(header, row, strict=True)) for row in reader]
    return header, rows


# --- what each stream serves, as a list of items (CSV: header and rows)


def trigger_logs(client: TestClient) -> list[dict]:
    answer = client.get(f"{COMMENT}/logs", params={"limit": 30}, headers=READONLY)
    assert answer.status_code == 200, answer.text
    return answer.json()["logs"]


def activities(client: TestClient) -> list[dict]:
    return client.get(f"{COMMENT}/activities", headers=READONLY).json()["activities"]


def channels(client: TestClient) -> list[dict]:
    return client.get("/conversation/v1/channels", headers=APIKEY).json()["channels"]


def custom_fields(client: TestClient) -> list[dict]:
    return client.get("/datahub/cdh/v1/custom-fields/", headers=APIKEY).json()


def members(client: TestClient) -> tuple[list[str], list[dict]]:
    started = client.post("/datahub/v1/members/export", headers=APIKEY).json()
    task = wait(client, f"/datahub/task/{started['id']}", lambda t: t["status"] == "success")
    return csv_rows(client.get(httpx.URL(task["result"]["download_url"]).path, headers=APIKEY))


def messages(client: TestClient) -> tuple[list[str], list[dict]]:
    window = {"started_at": "2026-10-25T00:00:00+00:00", "ended_at": "2026-11-02T00:00:00+00:00"}
    started = client.post("/conversation/v1/backups/messages", json=window, headers=APIKEY)
    backup = f"/conversation/v1/backups/{started.json()['backup_id']}"
    detail = wait(client, backup, lambda b: b["state"] == "completed")
    return csv_rows(client.get(httpx.URL(detail["download_url"]).path, headers=APIKEY))


def advance(client: TestClient, seconds: float) -> None:
    client.post("/_sandbox/clock/advance", params={"seconds": seconds}).raise_for_status()


# --- JSON streams: (spec, fetch, what an item served before becomes after)

JSON_CASES = {
    "add a number to trigger logs": (
        "comment.trigger_logs:add=channel_tag:number",
        trigger_logs,
        lambda log: (
            log
            | {
                "channel_tag": added_value(
                    "comment.trigger_logs", "channel_tag", "number", log["id"]
                )
            }
        ),
    ),
    "add a string to trigger logs": (
        "comment.trigger_logs:add=channel_tag:string",
        trigger_logs,
        lambda log: (
            log
            | {
                "channel_tag": added_value(
                    "comment.trigger_logs", "channel_tag", "string", log["id"]
                )
            }
        ),
    ),
    "add an object to channels": (
        "conversation.channels:add=routing:object",
        channels,
        lambda channel: (
            channel
            | {"routing": added_value("conversation.channels", "routing", "object", channel["id"])}
        ),
    ),
    "nest a number in activity stats": (
        "comment.activities:nest=stats.shares:number",
        activities,
        lambda activity: (
            activity
            | {
                "stats": activity["stats"]
                | {
                    "shares": added_value(
                        "comment.activities", "stats.shares", "number", activity["id"]
                    )
                }
            }
        ),
    ),
    "rename a trigger log field": (
        "comment.trigger_logs:rename=username>user_name",
        trigger_logs,
        lambda log: {("user_name" if k == "username" else k): v for k, v in log.items()},
    ),
    "rename a channel field": (
        "conversation.channels:rename=name>title",
        channels,
        lambda channel: {("title" if k == "name" else k): v for k, v in channel.items()},
    ),
    "retype a custom field's number id as a string": (
        "datahub.custom_fields:retype=id:string",
        custom_fields,
        lambda field: field | {"id": str(field["id"])},
    ),
    "retype activity stats (an object) as null": (
        "comment.activities:retype=stats:null",
        activities,
        lambda activity: activity | {"stats": None},
    ),
    "remove a trigger log field": (
        "comment.trigger_logs:remove=comment_text",
        trigger_logs,
        lambda log: {k: v for k, v in log.items() if k != "comment_text"},
    ),
    "remove a custom field field": (
        "datahub.custom_fields:remove=description",
        custom_fields,
        lambda field: {k: v for k, v in field.items() if k != "description"},
    ),
}


@pytest.mark.parametrize("case", JSON_CASES)
def test_a_json_stream_drifts_from_the_moment_on(make_sandbox, case):
    spec, fetch, drifted = JSON_CASES[case]
    app = make_sandbox(drift=DriftSpec.parse(spec, LATER))
    with TestClient(app, base_url="http://sandbox") as client:
        before = fetch(client)
        advance(client, HOUR)
        after = fetch(client)

    assert before and all(drifted(item) != item for item in before)  # the change shows
    assert after == [drifted(item) for item in before]
    assert [list(item) for item in after] == [list(drifted(item)) for item in before]  # order


def test_before_the_moment_the_answer_is_byte_for_byte_the_undrifted_one(make_sandbox):
    plain = make_sandbox()
    drifting = make_sandbox(drift=DriftSpec.parse("comment.trigger_logs:remove=error", LATER))
    path = f"{COMMENT}/logs?limit=50"
    with (
        TestClient(plain, base_url="http://sandbox") as one,
        TestClient(drifting, base_url="http://sandbox") as other,
    ):
        assert other.get(path, headers=READONLY).content == one.get(path, headers=READONLY).content
        advance(other, HOUR)
        assert other.get(path, headers=READONLY).content != one.get(path, headers=READONLY).content


def test_without_a_moment_drift_applies_from_the_start(make_sandbox):
    app = make_sandbox(drift=DriftSpec.parse("comment.trigger_logs:add=tag:string"))
    with TestClient(app, base_url="http://sandbox") as client:
        logs = trigger_logs(client)
    assert [log["tag"] for log in logs] == [
        added_value("comment.trigger_logs", "tag", "string", log["id"]) for log in logs
    ]


def test_added_values_are_derived_from_the_item_and_differ_between_items():
    ids = [f"item-{n}" for n in range(200)]
    numbers = [added_value("comment.trigger_logs", "tag", "number", i) for i in ids]
    assert all(isinstance(n, int) and 0 <= n < 1000 for n in numbers)
    assert len(set(numbers)) > 100
    assert numbers == [added_value("comment.trigger_logs", "tag", "number", i) for i in ids]
    assert added_value("datahub.members", "score", "number", 12) == added_value(
        "datahub.members", "score", "number", "12"
    )  # a CSV row's id is text, a JSON item's may be a number: the same value
    score = added_value("datahub.members", "score", "number", 12)
    assert added_value("datahub.members", "score", "number", 12, csv=True) == str(score)
    text = added_value("comment.trigger_logs", "stats.tag", "string", "x")
    assert isinstance(text, str) and text.startswith("tag-")
    thing = {"item": "x", "score": added_value("comment.trigger_logs", "tag", "number", "x")}
    assert added_value("comment.trigger_logs", "tag", "object", "x") == thing
    as_csv = added_value("comment.trigger_logs", "tag", "object", "x", csv=True)
    assert as_csv == json.dumps(thing, separators=(",", ":"))


# --- CSV files: (spec, fetch, header after, what a row served before becomes after)

CSV_CASES = {
    "add a column to the member export": (
        "datahub.members:add=loyalty_score:number",
        members,
        lambda header: [*header, "loyalty_score"],
        lambda row: (
            row
            | {
                "loyalty_score": str(
                    added_value("datahub.members", "loyalty_score", "number", row["member_id"])
                )
            }
        ),
    ),
    "add an object column to the message backup": (
        "conversation.messages:add=meta:object",
        messages,
        lambda header: [*header, "meta"],
        lambda row: (
            row
            | {
                "meta": json.dumps(
                    added_value("conversation.messages", "meta", "object", row["message_uuid"]),
                    separators=(",", ":"),
                )
            }
        ),
    ),
    "rename a member export column": (
        "datahub.members:rename=city>town",
        members,
        lambda header: ["town" if name == "city" else name for name in header],
        lambda row: {("town" if k == "city" else k): v for k, v in row.items()},
    ),
    "retype the member id as text": (
        "datahub.members:retype=member_id:string",
        members,
        lambda header: header,
        lambda row: row | {"member_id": "'" + row["member_id"]},
    ),
    "retype a backup number as text": (
        "conversation.messages:retype=conversation_id:string",
        messages,
        lambda header: header,
        lambda row: row | {"conversation_id": "'" + row["conversation_id"]},
    ),
    "retype a member export column as null": (
        "datahub.members:retype=member_level:null",
        members,
        lambda header: header,
        lambda row: row | {"member_level": ""},
    ),
    "remove a member export column": (
        "datahub.members:remove=city",
        members,
        lambda header: [name for name in header if name != "city"],
        lambda row: {k: v for k, v in row.items() if k != "city"},
    ),
    "remove a backup column": (
        "conversation.messages:remove=mime_type",
        messages,
        lambda header: [name for name in header if name != "mime_type"],
        lambda row: {k: v for k, v in row.items() if k != "mime_type"},
    ),
}


@pytest.mark.parametrize("case", CSV_CASES)
def test_a_csv_file_drifts_from_the_moment_on(make_sandbox, case):
    spec, fetch, drifted_header, drifted = CSV_CASES[case]
    app = make_sandbox(drift=DriftSpec.parse(spec, LATER))
    with TestClient(app, base_url="http://sandbox") as client:
        header, before = fetch(client)
        advance(client, HOUR)
        header_after, after = fetch(client)

    assert drifted_header(header) != header or any(drifted(row) != row for row in before)
    assert header_after == drifted_header(header)
    assert len(after) == len(before) > 0
    assert after == [drifted(row) for row in before]


def test_ground_truth_counts_what_was_served_drifted(make_sandbox):
    spec = "comment.trigger_logs:add=tag:number,comment.trigger_logs:rename=error>failure"
    app = make_sandbox(drift=DriftSpec.parse(spec, LATER))
    with TestClient(app, base_url="http://sandbox") as client:
        trigger_logs(client)  # before the moment: not counted
        early = client.get("/_sandbox/truth").json()["drift"]
        advance(client, HOUR)
        served = len(trigger_logs(client)) + len(trigger_logs(client))
        truth = client.get("/_sandbox/truth").json()
        report = client.get("/_sandbox/drift").json()

    assert early["active"] is False
    assert early["streams"]["comment.trigger_logs"]["answers"] == 0
    assert report == truth["drift"]
    assert report["from"] == LATER.isoformat()
    assert report["active"] is True
    assert report["streams"] == {
        "comment.trigger_logs": {
            "changes": ["add=tag:number", "rename=error>failure"],
            "answers": 2,
            "items": served,
            "applied": {"add=tag:number": served, "rename=error>failure": served},
        }
    }
    assert set(truth) == {"comment", "conversation", "datahub", "drift"}


def test_without_drift_the_truth_has_no_drift_section(make_sandbox):
    app = make_sandbox()
    assert app.drift is None  # not in the chain at all
    with TestClient(app, base_url="http://sandbox") as client:
        assert set(client.get("/_sandbox/truth").json()) == {"comment", "conversation", "datahub"}
        assert client.get("/_sandbox/drift").json() == {
            "from": None,
            "active": False,
            "streams": {},
        }


def test_drift_leaves_other_streams_and_error_answers_alone(make_sandbox):
    plain = make_sandbox()
    drifting = make_sandbox(drift=DriftSpec.parse("comment.trigger_logs:remove=error"))
    with (
        TestClient(plain, base_url="http://sandbox") as one,
        TestClient(drifting, base_url="http://sandbox") as other,
    ):
        for path in (f"{COMMENT}/activities", f"{COMMENT}/logs?limit=0", f"{COMMENT}/stats"):
            first, second = one.get(path, headers=READONLY), other.get(path, headers=READONLY)
            assert (second.status_code, second.content) == (first.status_code, first.content)
        assert first.status_code == 200 and second.status_code == 200


def test_every_drift_path_is_served_by_its_service(http):
    """A path in STREAMS that no route serves would drift nothing without a word."""
    headers = APIKEY | READONLY
    for name, served in STREAMS.items():
        mounts = [mount for (service, _), mount in MOUNTS.items() if service == served.service]
        for mount, (path, _) in itertools.product(mounts, served.paths):
            answer = http.get(mount + re.sub(r"\{[^}]+\}", "1", path), headers=headers)
            no_route = (
                answer.status_code == 404 and answer.json()["error"]["message"] == "Not Found"
            )
            assert not no_route, (name, mount, path)


def test_a_csv_file_drifts_the_same_whatever_its_chunks():
    """Records cut across chunks (a quoted line break, a character split in two) come out
    whole."""
    text = 'message_uuid,text,url\r\nm1,"two\r\nlines, ""quoted""",\r\nm2,naïve ☃,u\r\n'
    data = text.encode()
    spec = DriftSpec.parse("conversation.messages:add=tag:string,conversation.messages:remove=url")
    changes = spec.of("conversation.messages")

    def drifted(chunks: list[bytes]) -> bytes:
        file = CsvDrift("conversation.messages", changes, dict.fromkeys(changes, 0))
        out = [file.feed(chunk) for chunk in chunks[:-1]]
        return b"".join([*out, file.feed(chunks[-1], last=True)])

    whole = drifted([data])
    assert whole.decode() == (
        "message_uuid,text,tag\r\n"
        f'm1,"two\r\nlines, ""quoted""",'
        f"{added_value('conversation.messages', 'tag', 'string', 'm1')}\r\n"
        f"m2,naïve ☃,{added_value('conversation.messages', 'tag', 'string', 'm2')}\r\n"
    )
    for size in (1, 2, 3, 5, 7, 16):
        assert drifted([data[i : i + size] for i in range(0, len(data), size)]) == whole


BAD_SPECS = {
    "nosuch.stream:add=x:number": "unknown stream 'nosuch.stream'",
    "comment.trigger_logs:grow=x:number": "kind one of add, nest, rename, retype, remove",
    "comment.trigger_logs:add=x": "write add=<field>:<number|string|object>",
    "comment.trigger_logs:add=x:boolean": "add takes the types number, string, object",
    "comment.trigger_logs:add=username:number": "already serves 'username'",
    "comment.trigger_logs:rename=usrname>user": "serves no 'usrname'",
    "comment.trigger_logs:retype=id:number": "retype takes the types string, null",
    "comment.activities:nest=name.x:number": "'name' is not an object field",
    "comment.activities:nest=stats:number": "write nest=<object field>.<field>",
    "datahub.members:nest=city.x:number": "nest needs a JSON stream",
    "datahub.members:remove=cty": "datahub.members serves no 'cty'; its columns:",
    "datahub.members:remove=city,datahub.members:retype=city:null": "serves no 'city'",
}


@pytest.mark.parametrize("spec", BAD_SPECS)
def test_a_bad_spec_is_refused_naming_what_is_wrong(spec):
    with pytest.raises(ValueError) as refused:
        DriftSpec.parse(spec)
    assert BAD_SPECS[spec] in str(refused.value)
    assert repr(spec.split(",")[-1]) in str(refused.value)  # the change at fault


def test_the_command_line_refuses_a_bad_spec_and_a_moment_without_timezone(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--drift", "comment.trigger_logs:remove=nope"])
    assert "comment.trigger_logs serves no 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--drift", "comment.trigger_logs:remove=error", "--drift-from", "2026-11-01"])
    assert "--drift-from: needs a timezone" in capsys.readouterr().err


def test_the_command_line_builds_the_spec():
    args = parse_args(
        [
            "--drift",
            "comment.trigger_logs:add=tag:number, datahub.members:remove=city",
            "--drift-from",
            "2026-11-01T13:00:00+00:00",
        ]
    )
    assert [str(change) for change in args.drift.changes] == [
        "comment.trigger_logs:add=tag:number",
        "datahub.members:remove=city",
    ]
    assert args.drift.start == LATER
    assert not parse_args([]).drift


def test_a_started_sandbox_drifts_as_its_command_line_says():
    drift = "comment.trigger_logs:add=tag:number,conversation.channels:remove=timezone"
    arguments = ["--frozen", "--now", ANCHOR.isoformat(), "--drift", drift]
    arguments += ["--drift-from", LATER.isoformat()]
    with (
        running_sandbox(_free_port(), *arguments) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        before = trigger_logs(client), channels(client)
        advance(client, HOUR)
        after = trigger_logs(client), channels(client)
        report = client.get("/_sandbox/drift").json()

    assert all("tag" not in log for log in before[0])
    assert [log["tag"] for log in after[0]] == [
        added_value("comment.trigger_logs", "tag", "number", log["id"]) for log in before[0]
    ]
    assert all("timezone" in channel for channel in before[1])
    assert after[1] == [{k: v for k, v in c.items() if k != "timezone"} for c in before[1]]
    assert report["streams"]["conversation.channels"]["answers"] == 1
