"""Text a service with UTF-16 strings keeps: a lone surrogate (`"\\ud800"`, valid JSON) in a
string field is taken, and served back whole (status 200, the body complete): in JSON as the
escape `\\ud800`, in CSV files, which UTF-8 cannot carry it in, as U+FFFD."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from starlette.testclient import TestClient

from sandbox.app import SandboxApp
from sandbox.conversation import messages
from tests.conftest import build_hooked
from tests.constants import APIKEY, COMMENT, READWRITE

ODD = "odd \ud800 text"  # a lone high surrogate, as `"odd \ud800 text"` in JSON
IN_CSV = "odd \ufffd text"
SECRET = "test-signing-secret"


@pytest.fixture(scope="module")
def hooks() -> list[httpx.Request]:
    """The webhook requests the sandbox sent."""
    return []


@pytest.fixture(scope="module")
def app(hooks) -> Iterator[SandboxApp]:
    built = build_hooked(hooks, SECRET)
    yield built
    built.sandbox.webhooks.close()


@pytest.fixture(scope="module")
def client(app) -> Iterator[TestClient]:
    with TestClient(app, base_url="http://sandbox") as http:
        yield http


def send(client: TestClient, method: str, path: str, body: dict, headers: dict) -> httpx.Response:
    """`body` as JSON with each lone surrogate escaped (`json.dumps`' default, and what a
    JavaScript client writes); httpx's own `json=` encodes UTF-8, which cannot carry one."""
    headers = headers | {"content-type": "application/json"}
    return client.request(method, path, headers=headers, content=json.dumps(body))


def served_json(answer: httpx.Response):
    """A whole JSON answer carrying the lone surrogate as its escape, decoded."""
    assert answer.status_code == 200, answer.text
    assert b"\\ud800" in answer.content
    return json.loads(answer.content.decode("utf-8"))


def served_csv(answer: httpx.Response) -> list[dict]:
    """A whole CSV file, strict UTF-8, read into rows."""
    assert answer.status_code == 200, answer.text
    text = answer.content.decode("utf-8")
    assert text.endswith("\r\n")
    return list(csv.DictReader(io.StringIO(text, newline="")))


def instagram_account(client: TestClient) -> str:
    accounts = client.get(f"{COMMENT}/accounts", headers=READWRITE).json()["accounts"]
    return next(a["id"] for a in accounts if a["platform"] == "instagram")


def a_contact(client: TestClient, index: int) -> dict:
    """A contact of its own for each test: they share one sandbox."""
    member_id = client.get("/_sandbox/truth/datahub/default/members/ids").json()["ids"][index]
    return client.get(f"/_sandbox/datahub/default/contacts/{member_id}").json()


def update_profile(client: TestClient, contact: dict, data: dict) -> None:
    identity = {k: contact[k] for k in ("channel_type", "external_channel_id")}
    identity["external_member_id"] = contact["external_member_id"]
    body = identity | {"data": data}
    answer = send(client, "PATCH", "/datahub/v1/contacts/profile", body, APIKEY)
    assert answer.status_code == 200, answer.text


def wait(client: TestClient, path: str, done) -> dict:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        body = client.get(path, headers=APIKEY).json()
        if done(body):
            return body
        time.sleep(0.02)
    raise AssertionError(f"{path} did not finish")


def test_comment_activity_lists_serve_a_lone_surrogate_as_its_escape(client):
    body = {
        "account_id": instagram_account(client),
        "trigger": "ig_comment",
        "name": ODD,
        "keywords": [ODD],
        "public_replies": [ODD],
        "dm": [{"type": "text", "text": ODD}],
    }
    created = send(client, "POST", f"{COMMENT}/activities", body, READWRITE)
    assert created.status_code == 201, created.text
    activity_id = json.loads(created.content)["id"]

    listed = served_json(client.get(f"{COMMENT}/activities", headers=READWRITE))
    [found] = [a for a in listed["activities"] if a["id"] == activity_id]
    assert (found["name"], found["keywords"], found["public_replies"]) == (ODD, [ODD], [ODD])
    detail = served_json(client.get(f"{COMMENT}/activities/{activity_id}", headers=READWRITE))
    assert detail["activity"]["dm"][0]["text"] == ODD
    assert client.get("/_sandbox/truth").status_code == 200


@pytest.mark.parametrize(("length", "status"), [(100, 201), (101, 400)])
def test_a_lone_surrogate_counts_as_one_character_against_a_bound(client, length, status):
    name = "\ud800" + "x" * (length - 1)  # the name's bound is 100 characters
    body = {"account_id": instagram_account(client), "trigger": "ig_comment", "name": name}
    answer = send(client, "POST", f"{COMMENT}/activities", body, READWRITE)
    assert answer.status_code == status, answer.text
    if status == 400:
        assert answer.json()["error"]["field"] == "name"
        assert "at most 100 characters" in answer.json()["error"]["message"]


def test_conversation_team_lists_serve_a_lone_surrogate_as_its_escape(client):
    # The first team of each region is not editable (sandbox/conversation/directory.py).
    team_id = client.get("/conversation/v2/teams", headers=APIKEY).json()["teams"][1]["id"]
    changed = send(client, "PATCH", f"/conversation/v1/teams/{team_id}", {"name": ODD}, APIKEY)
    assert served_json(changed)["name"] == ODD

    listed = served_json(client.get("/conversation/v2/teams", headers=APIKEY))
    assert [t["name"] for t in listed["teams"] if t["id"] == team_id] == [ODD]


def test_data_hub_contacts_and_records_serve_a_lone_surrogate_as_its_escape(client):
    contact = a_contact(client, 0)
    update_profile(client, contact, {"full_name": ODD, "city": ODD})
    path = f"/_sandbox/datahub/default/contacts/{contact['member_id']}"
    assert served_json(client.get(path))["full_name"] == ODD

    coupon = {
        "timestamp": "2026-10-01T09:30:00+00:00",
        "source_platform_name": "shopify",
        "source_store_type": "online_store",
        "source_store_id": "store-1",
        "source_platform_customer_id": "cust-odd",
        "id": "cp-odd",
        "name": ODD,
        "url": "https://shop.example/coupons/odd",
        "code": "ODD",
        "is_redeemable": True,
        "status": "active",
        "discount_type": "percentage",
        "discount_value": 10,
    }
    accepted = send(client, "POST", "/datahub/v1/records/coupon", coupon, APIKEY)
    assert accepted.status_code == 200, accepted.text
    assert served_json(client.get("/_sandbox/records/coupon/cp-odd"))["current"]["name"] == ODD


def test_the_member_export_serves_a_lone_surrogate_as_the_replacement_character(client):
    contact = a_contact(client, 1)
    update_profile(client, contact, {"full_name": ODD, "address": f"{ODD}, line 2"})

    started = client.post("/datahub/v1/members/export", headers=APIKEY).json()
    task = wait(client, f"/datahub/task/{started['id']}", lambda t: t["status"] == "success")
    path = httpx.URL(task["result"]["download_url"]).path
    rows = served_csv(client.get(path, headers=APIKEY))

    assert len(rows) == task["result"]["row_count"]
    [odd] = [r for r in rows if r["member_id"] == str(contact["member_id"])]
    assert (odd["full_name"], odd["address"]) == (IN_CSV, f"{IN_CSV}, line 2")


def test_the_message_backup_serves_a_lone_surrogate_as_the_replacement_character(
    app, client, monkeypatch
):
    """Messages come from the platforms' users, not from an API call: the text pool is
    where a user's odd text enters the sandbox."""
    service = app.services[("conversation", "default")]
    lo, hi = service.messages.year()
    kinds, texts = service.messages.table["kind"][lo:hi], service.messages.table["text"][lo:hi]
    used = int(texts[np.flatnonzero(kinds == 0)[-1]])  # the text of a member's message
    pool = list(messages.TEXTS)
    pool[used] = ODD
    monkeypatch.setattr(messages, "TEXTS", tuple(pool))

    window = {"started_at": "2025-11-01T00:00:00+00:00", "ended_at": "2026-11-02T00:00:00Z"}
    started = send(client, "POST", "/conversation/v1/backups/messages", window, APIKEY)
    backup_id = started.json()["backup_id"]
    detail = wait(
        client, f"/conversation/v1/backups/{backup_id}", lambda b: b["state"] == "completed"
    )
    rows = served_csv(client.get(httpx.URL(detail["download_url"]).path, headers=APIKEY))

    truth = client.get("/_sandbox/truth").json()["conversation"]["default"]["messages"]
    assert len(rows) == truth
    assert IN_CSV in {r["text"] for r in rows}


def test_webhooks_carry_a_lone_surrogate_as_its_escape(app, client, hooks):
    sent = len(hooks)
    update_profile(client, a_contact(client, 2), {"city": ODD})

    assert app.sandbox.webhooks.wait_idle(10)
    [request] = hooks[sent:]
    assert b"\\ud800" in request.content
    assert json.loads(request.content.decode("utf-8"))["data"]["city"] == ODD
    signed = hmac.new(SECRET.encode(), request.content, hashlib.sha256).hexdigest()
    assert request.headers["Service-Signature"] == signed
