"""Odd text from a service lands whole: a lone surrogate the sandbox serves (`\\ud800` in JSON,
U+FFFD in its CSV files; sandbox/encoding.py) lands as U+FFFD, and every row and every other
value as the sandbox holds it."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import dagster as dg
import duckdb
import httpx
import numpy as np

from assets import comment, conversation, datahub
from pipelines.pull.landing import today
from pipelines.streams.comment import ACTIVITIES
from pipelines.streams.conversation import MESSAGES
from pipelines.streams.conversation.backups import backup_window
from pipelines.streams.datahub import MEMBERS
from pipelines.streams.datahub.export import MEMBER_TEXT_COLUMNS
from sandbox.conversation import messages as sandbox_messages
from tests.pipelines.conftest import APIKEY

ODD = "odd \ud800 text"  # a lone high surrogate, `"odd \ud800 text"` in JSON
LANDED = "odd \ufffd text"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
READWRITE = {"Authorization": "Bearer sa_live_demo_readwrite"}


def landed(text: str | None) -> str | None:
    """What the lake holds of a text the sandbox holds."""
    return None if text is None else LONE_SURROGATE.sub("\ufffd", text)


def send(sandbox, method: str, path: str, body: dict, headers: dict) -> httpx.Response:
    """`body` as JSON with a lone surrogate escaped: httpx's own `json=` cannot carry one."""
    headers = headers | {"content-type": "application/json"}
    return httpx.request(method, f"{sandbox.url}{path}", headers=headers, content=json.dumps(body))


def materialize(resources: dict, asset, first=None, last=None) -> dg.ExecuteInProcessResult:
    tags = {}
    if first is not None:
        tags = {
            "dagster/asset_partition_range_start": first.isoformat(),
            "dagster/asset_partition_range_end": last.isoformat(),
        }
    result = dg.materialize(
        [asset],
        resources=resources,
        tags=tags,
        raise_on_error=False,
    )
    failures = [
        e.step_failure_data.error.to_string() for e in result.all_events if e.is_step_failure
    ]
    assert result.success, failures
    return result


def rows(resources: dict, stream, region: str = "default") -> list[dict]:
    relation = resources["lake"].lake().relation(stream)
    found = duckdb.sql(f"SELECT * FROM {relation} WHERE connection = '{region}'")
    return [dict(zip(found.columns, row, strict=True)) for row in found.fetchall()]


def test_an_activity_with_a_lone_surrogate_lands_with_the_replacement_character(
    start_sandbox, sync_env
):
    sandbox = start_sandbox()
    base = "/comment/api/v1"
    accounts = httpx.get(f"{sandbox.url}{base}/accounts", headers=READWRITE).json()["accounts"]
    body = {
        "account_id": next(a["id"] for a in accounts if a["platform"] == "instagram"),
        "trigger": "ig_comment",
        "name": ODD,
        "keywords": [ODD, "plain"],
    }
    created = send(sandbox, "POST", f"{base}/activities", body, READWRITE)
    assert created.status_code == 201, created.text
    odd_id = json.loads(created.content)["id"]
    resources = sync_env(sandbox)

    materialize(resources, comment.ASSETS["activities"])

    served = httpx.get(f"{sandbox.url}{base}/activities", headers=READWRITE)
    expected = {a["id"]: a for a in json.loads(served.content)["activities"]}
    scope = httpx.get(f"{sandbox.url}{base}/me", headers=READWRITE).json()["workspace"]["id"]
    assert set(expected) == set(sandbox.truth_ids("comment", scope, "activities"))
    lake = {row["id"]: row for row in rows(resources, ACTIVITIES)}
    assert set(lake) == set(expected)
    assert (lake[odd_id]["name"], lake[odd_id]["keywords"]) == (LANDED, [LANDED, "plain"])
    for activity_id, activity in expected.items():
        assert lake[activity_id]["name"] == landed(activity["name"])
        assert lake[activity_id]["keywords"] == [landed(k) for k in activity["keywords"]]


def test_a_member_with_a_lone_surrogate_lands_with_the_replacement_character(
    start_sandbox, sync_env
):
    sandbox = start_sandbox()
    member_ids = sandbox.truth_ids("datahub", "default", "members")
    hub = sandbox.app.services[("datahub", "default")].hub
    contact = hub.member(member_ids[0])
    identity = {k: contact[k] for k in ("channel_type", "external_channel_id")}
    identity["external_member_id"] = contact["external_member_id"]
    change = {"full_name": ODD, "address": f"{ODD}, line 2"}
    body = identity | {"data": change}
    answer = send(sandbox, "PATCH", "/datahub/v1/contacts/profile", body, {"apikey": APIKEY})
    assert answer.status_code == 200, answer.text
    resources = sync_env(sandbox)

    materialize(resources, datahub.ASSETS["members"], today(), today())

    lake = {row["member_id"]: row for row in rows(resources, MEMBERS)}
    assert sorted(lake) == sorted(member_ids)
    odd = lake[contact["member_id"]]
    assert (odd["full_name"], odd["address"]) == (LANDED, f"{LANDED}, line 2")
    for member_id in member_ids:
        held = hub.member(member_id)
        expected = {c: landed(held[c] or None) for c in MEMBER_TEXT_COLUMNS}
        assert {c: lake[member_id][c] for c in MEMBER_TEXT_COLUMNS} == expected, member_id


def test_a_message_with_a_lone_surrogate_lands_with_the_replacement_character(
    frozen_sandbox, sync_env, monkeypatch
):
    """A message's text comes from the platform's user, not from an API call: the sandbox's
    pool of texts is where a user's odd text enters."""
    messages = frozen_sandbox.app.services[("conversation", "default")].messages
    lo, hi = messages.year()
    # A member's text message (an image carries no text): the newest one.
    texts = (messages.table["kind"][lo:hi] == 0) & (messages.table["mtype"][lo:hi] == 0)
    newest = int(lo + np.flatnonzero(texts)[-1])
    pool = list(sandbox_messages.TEXTS)
    pool[int(messages.table["text"][newest])] = ODD
    monkeypatch.setattr(sandbox_messages, "TEXTS", tuple(pool))
    first = datetime.fromtimestamp(int(messages.table["ts"][newest]), UTC).date()
    first = min(first, today() - timedelta(days=1))
    resources = sync_env(frozen_sandbox)

    materialize(resources, conversation.ASSETS["messages"], first, today())

    started_at, ended_at = backup_window([first, today()])
    window = np.arange(*messages.window(started_at.timestamp(), ended_at.timestamp()))
    expected = {row[0]: landed(row[7]) for row in messages.backup_rows(window)}
    lake = {row["message_uuid"]: row["text"] for row in rows(resources, MESSAGES)}
    assert lake == expected
    assert LANDED in lake.values()
