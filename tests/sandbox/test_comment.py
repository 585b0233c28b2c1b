"""Conformance of the comment automation sandbox to the service's documented behaviour.

Most checks share one frozen sandbox (rate limits off); checks that move the clock, inject
faults, count the rate limit or compare exact totals before and after a change build their own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import date, datetime, timedelta

import pytest
from starlette.testclient import TestClient

from sandbox.app import SandboxApp, build_app
from sandbox.clock import iso
from sandbox.comment.models import TRIGGER_PLATFORM
from sandbox.config import SandboxConfig
from sandbox.faults import FaultSpec
from tests.conftest import ANCHOR
from tests.constants import COMMENT, READONLY, READWRITE

AGENCY = {"Authorization": "Bearer sa_live_agency_readwrite"}
TODAY = ANCHOR.date()
TEXT = {"type": "text", "text": "Here is the link 👇"}
BUTTON = {"type": "button", "title": "Shop now", "url": "https://shop.example/p/1"}
IMAGE = {"type": "image", "image_url": "https://cdn.shop.example/offer.jpg"}
CARD = {"type": "card", "title": "Everyday tote", "image_url": "https://cdn.shop.example/t.png"}
CARD_BUTTON = {"title": "View", "url": "https://shop.example/p/2"}
TRIGGER_LOG_FIELDS = {
    "id",
    "activity_id",
    "activity_name",
    "account_id",
    "trigger",
    "username",
    "comment_text",
    "post_id",
    "action",
    "status",
    "error",
    "created_at",
}


# --- fixtures and helpers -----------------------------------------------------------------


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[SandboxApp, TestClient]]:
    app = build_app(SandboxConfig(frozen=True, now=ANCHOR, rate_limits=False))
    with TestClient(app, base_url="http://sandbox") as client:
        yield app, client
    app.sandbox.webhooks.close()


@pytest.fixture(scope="module")
def client(shared) -> TestClient:
    return shared[1]


@pytest.fixture(scope="module")
def accounts(client) -> dict[str, str]:
    """The demo workspace's first account id per platform."""
    found: dict[str, str] = {}
    for account in client.get(f"{COMMENT}/accounts", headers=READWRITE).json()["accounts"]:
        found.setdefault(account["platform"], account["id"])
    return found


def open_client(app: SandboxApp) -> TestClient:
    return TestClient(app, base_url="http://sandbox")


def error_of(response, status: int, code: str, field: str | None = None) -> dict:
    """Check the one error body the service documents and return its `error` object."""
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"]
    error = body["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert set(error) <= {"code", "message", "field", "action_url", "retry_after"}
    if field is not None:
        assert error.get("field") == field, error
    return error


def create(client: TestClient, accounts: dict, trigger: str = "ig_comment", **fields):
    body = {"account_id": accounts[TRIGGER_PLATFORM[trigger]], "trigger": trigger, **fields}
    return client.post(f"{COMMENT}/activities", headers=READWRITE, json=body)


def created(client: TestClient, accounts: dict, trigger: str = "ig_comment", **fields) -> dict:
    response = create(client, accounts, trigger, **fields)
    assert response.status_code == 201, response.text
    return response.json()


def all_logs(client: TestClient, headers=READWRITE, **params) -> tuple[list[dict], int]:
    """Every page of GET /logs; also the `total` of the first page."""
    logs, page, total = [], 0, None
    while True:
        body = client.get(
            f"{COMMENT}/logs", headers=headers, params={"limit": 200, "page": page, **params}
        ).json()
        total = body["total"] if total is None else total
        logs.extend(body["logs"])
        if not body["logs"]:
            return logs, total
        page += 1


def truth(client: TestClient, workspace_id: str) -> dict:
    return client.get("/_sandbox/truth").json()["comment"][workspace_id]


def truth_ids(client: TestClient, workspace_id: str, stream: str) -> list:
    return client.get(f"/_sandbox/truth/comment/{workspace_id}/{stream}/ids").json()["ids"]


def workspace_id(client: TestClient, headers=READWRITE) -> str:
    return client.get(f"{COMMENT}/me", headers=headers).json()["workspace"]["id"]


def days_back(n: int) -> str:
    return (TODAY - timedelta(days=n)).isoformat()


# --- OpenAPI ------------------------------------------------------------------------------


def test_openapi_lists_exactly_the_ten_operations(client):
    document = client.get(f"{COMMENT}/openapi.json").json()
    operations = {
        (method.upper(), path): spec["operationId"]
        for path, methods in document["paths"].items()
        for method, spec in methods.items()
    }
    assert operations == {
        ("GET", "/me"): "get_me",
        ("GET", "/accounts"): "list_accounts",
        ("GET", "/accounts/{id}/posts"): "list_account_posts",
        ("GET", "/activities"): "list_activities",
        ("POST", "/activities"): "create_activity",
        ("GET", "/activities/{id}"): "get_activity",
        ("PATCH", "/activities/{id}"): "update_activity",
        ("DELETE", "/activities/{id}"): "delete_activity",
        ("GET", "/logs"): "list_logs",
        ("GET", "/stats"): "get_stats",
    }
    assert "201" in document["paths"]["/activities"]["post"]["responses"]
    assert "502" in document["paths"]["/accounts/{id}/posts"]["get"]["responses"]


# --- authentication, scope, rate limit ----------------------------------------------------

READ_PATHS = ["/me", "/accounts", "/activities", "/logs", "/stats"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer "},
        {"Authorization": "Bearer sa_live_nobody"},
        {"Authorization": "Bearer demo-apikey"},
        {"Authorization": "Basic sa_live_demo_readwrite"},
        {"Authorization": "sa_live_demo_readwrite"},
    ],
    ids=["missing", "empty", "unknown", "wrong-prefix", "basic", "no-scheme"],
)
@pytest.mark.parametrize("path", READ_PATHS)
def test_missing_or_invalid_key_is_401(client, headers, path):
    error_of(client.get(COMMENT + path, headers=headers), 401, "unauthorized")


@pytest.mark.parametrize("path", READ_PATHS)
def test_read_scope_reads(client, path):
    assert client.get(COMMENT + path, headers=READONLY).status_code == 200


@pytest.mark.parametrize("method", ["POST", "PATCH", "DELETE"])
def test_read_scope_cannot_write(client, accounts, method):
    activity = created(client, accounts)
    path = "/activities" if method == "POST" else f"/activities/{activity['id']}"
    body = {
        "POST": {"account_id": accounts["instagram"], "trigger": "ig_comment"},
        "PATCH": {"name": "x"},
        "DELETE": None,
    }[method]
    response = client.request(method, COMMENT + path, headers=READONLY, json=body)
    error = error_of(response, 403, "insufficient_scope")
    assert error["action_url"].startswith("https://")
    after = client.get(f"{COMMENT}/activities/{activity['id']}", headers=READONLY)
    assert after.json()["activity"] == activity


def test_workspaces_are_separate(client):
    demo = client.get(f"{COMMENT}/activities", headers=READWRITE).json()["activities"]
    agency = client.get(f"{COMMENT}/activities", headers=AGENCY).json()["activities"]
    assert workspace_id(client) != workspace_id(client, AGENCY)
    assert not {a["id"] for a in demo} & {a["id"] for a in agency}
    error_of(client.get(f"{COMMENT}/activities/{demo[0]['id']}", headers=AGENCY), 404, "not_found")


def test_rate_limit_is_120_per_minute_per_key(make_sandbox):
    with open_client(make_sandbox()) as http:
        for _ in range(120):
            assert http.get(f"{COMMENT}/stats", headers=READWRITE).status_code == 200
        error = error_of(http.get(f"{COMMENT}/stats", headers=READWRITE), 429, "rate_limited")
        assert isinstance(error["retry_after"], int) and error["retry_after"] >= 1
        # Per key: the read-only key of the same workspace still has its own budget.
        assert http.get(f"{COMMENT}/stats", headers=READONLY).status_code == 200


def test_trial_expired_refuses_all_but_me(make_sandbox):
    app = make_sandbox()
    with open_client(app) as http:
        ends = http.get(f"{COMMENT}/me", headers=AGENCY).json()["workspace"]["trial_ends_at"]
        assert http.get(f"{COMMENT}/accounts", headers=AGENCY).status_code == 200
        app.sandbox.clock.advance((datetime.fromisoformat(ends) - ANCHOR).total_seconds())
        error = error_of(http.get(f"{COMMENT}/accounts", headers=AGENCY), 403, "trial_expired")
        assert error["action_url"].startswith("https://")
        assert http.get(f"{COMMENT}/me", headers=AGENCY).status_code == 200
        assert http.get(f"{COMMENT}/accounts", headers=READWRITE).status_code == 200


# --- workspace and accounts ---------------------------------------------------------------


def test_me_describes_workspace_without_the_key(client):
    body = client.get(f"{COMMENT}/me", headers=READONLY).json()
    assert set(body) == {"user", "workspace", "usage", "api_key"}
    assert set(body["workspace"]) == {
        "id",
        "name",
        "plan",
        "trial_ends_at",
        "service_status",
        "billing_url",
    }
    assert body["workspace"]["billing_url"].startswith("https://")
    assert body["api_key"]["scope"] == "read"
    assert "sa_live_demo_readonly" not in str(body)
    assert body["workspace"]["id"] in client.get("/_sandbox/truth").json()["comment"]


def test_me_usage_counts_this_months_logs(client):
    usage = client.get(f"{COMMENT}/me", headers=READWRITE).json()["usage"]
    logs, _ = all_logs(client, days=TODAY.day)
    ok = [log for log in logs if log["status"] == "success"]
    assert usage["period"] == TODAY.strftime("%Y-%m")
    assert usage["public_replies"] == sum(log["action"] == "public_reply" for log in ok)
    assert usage["dms"] == sum(log["action"] == "dm" for log in ok)
    assert usage["failed"] == len(logs) - len(ok)


def test_accounts_match_the_trigger_table(client):
    body = client.get(f"{COMMENT}/accounts", headers=READWRITE).json()
    assert body["connect_url"].startswith("https://")
    accounts = body["accounts"]
    assert 3 <= len(accounts) <= 6
    for account in accounts:
        assert account["supported_triggers"]
        assert {TRIGGER_PLATFORM[t] for t in account["supported_triggers"]} == {account["platform"]}
        assert datetime.fromisoformat(account["connected_at"]) < ANCHOR
    expiries = [a["token_expires_at"] for a in accounts]
    assert None in expiries
    assert any(
        e and ANCHOR < datetime.fromisoformat(e) <= ANCHOR + timedelta(days=7) for e in expiries
    )


# --- posts --------------------------------------------------------------------------------


def test_posts_default_kind_is_posts_newest_first(client, accounts):
    path = f"{COMMENT}/accounts/{accounts['instagram']}/posts"
    default = client.get(path, headers=READWRITE).json()["posts"]
    assert default == client.get(path, headers=READWRITE, params={"kind": "posts"}).json()["posts"]
    assert 10 <= len(default) <= 25
    stamps = [post["timestamp"] for post in default]
    assert stamps == sorted(stamps, reverse=True)
    assert all(
        set(post) == {"id", "caption", "media_type", "timestamp", "permalink"} for post in default
    )


@pytest.mark.parametrize(
    "platform,has_stories", [("instagram", True), ("facebook", False), ("threads", False)]
)
def test_stories_are_instagrams_of_the_last_24_hours(client, accounts, platform, has_stories):
    stories = client.get(
        f"{COMMENT}/accounts/{accounts[platform]}/posts",
        headers=READWRITE,
        params={"kind": "story"},
    ).json()["posts"]
    assert bool(stories) == has_stories
    for story in stories:
        assert ANCHOR - timedelta(days=1) < datetime.fromisoformat(story["timestamp"]) <= ANCHOR


@pytest.mark.parametrize(
    "account,params,status,code,field",
    [
        ("not-a-uuid", {}, 400, "invalid_request", "id"),
        ("00000000-0000-4000-8000-000000000000", {}, 400, "account_not_found", "id"),
        (None, {"kind": "reels"}, 400, "invalid_request", "kind"),
    ],
    ids=["malformed", "unknown", "bad-kind"],
)
def test_posts_refuses(client, accounts, account, params, status, code, field):
    path = f"{COMMENT}/accounts/{account or accounts['instagram']}/posts"
    error_of(client.get(path, headers=READWRITE, params=params), status, code, field)


def test_posts_platform_failure_is_502(make_sandbox):
    with open_client(make_sandbox(faults=FaultSpec(posts_502=1.0))) as http:
        accounts = http.get(f"{COMMENT}/accounts", headers=READWRITE).json()["accounts"]
        path = f"{COMMENT}/accounts/{accounts[0]['id']}/posts"
        error_of(http.get(path, headers=READWRITE), 502, "platform_error")
        assert http.get(f"{COMMENT}/activities", headers=READWRITE).status_code == 200


# --- creating activities: defaults, required fields, accounts -----------------------------


def test_create_defaults_to_a_draft(client, accounts):
    activity = created(client, accounts)
    assert activity["status"] == "draft"
    assert activity["match"] == "contains" and activity["post_scope"] == "all"
    assert activity["keywords"] == [] and activity["dm"] == [] and activity["post_ids"] is None
    assert activity["follow_gate"]["enabled"] is False
    assert activity["platform"] == "instagram" and activity["account_id"] == accounts["instagram"]
    assert activity["created_at"] == activity["updated_at"] == iso(ANCHOR)
    assert activity["stats"] == {"public_replies_sent": 0, "dms_sent": 0}
    assert activity["dashboard_url"].startswith("https://")
    listed = client.get(f"{COMMENT}/activities", headers=READWRITE).json()["activities"]
    assert activity in listed
    assert (
        client.get(f"{COMMENT}/activities/{activity['id']}", headers=READWRITE).json()["activity"]
        == activity
    )


def test_create_echoes_every_field(client, accounts):
    fields = {
        "name": "Spring sale",
        "keywords": ["Price", "LINK"],
        "match": "exact",
        "public_replies": ["Sent you a DM"],
        "dm": [TEXT, BUTTON],
        "follow_gate": {
            "enabled": True,
            "opening_text": "Follow us first",
            "button_title": "Done",
            "not_following_text": "Not yet!",
        },
        "start_at": "2026-11-02T00:00:00+00:00",
        "end_at": "2026-11-09T00:00:00+00:00",
        "status": "active",
    }
    activity = created(client, accounts, **fields)
    assert {name: activity[name] for name in fields} == fields


@pytest.mark.parametrize("missing", ["account_id", "trigger"])
def test_create_requires(client, accounts, missing):
    body = {"account_id": accounts["instagram"], "trigger": "ig_comment"}
    del body[missing]
    response = client.post(f"{COMMENT}/activities", headers=READWRITE, json=body)
    error_of(response, 400, "invalid_request", missing)


def test_create_on_unknown_account_is_account_not_found(client):
    body = {"account_id": "00000000-0000-4000-8000-000000000000", "trigger": "ig_comment"}
    response = client.post(f"{COMMENT}/activities", headers=READWRITE, json=body)
    error_of(response, 400, "account_not_found", "account_id")


def test_create_on_another_workspaces_account_is_account_not_found(client):
    other = client.get(f"{COMMENT}/accounts", headers=AGENCY).json()["accounts"][0]
    body = {"account_id": other["id"], "trigger": other["supported_triggers"][0]}
    response = client.post(f"{COMMENT}/activities", headers=READWRITE, json=body)
    error_of(response, 400, "account_not_found", "account_id")


@pytest.mark.parametrize(
    "trigger,platform",
    [
        ("ig_comment", "facebook"),
        ("fb_comment", "instagram"),
        ("threads_reply", "instagram"),
        ("ig_story", "threads"),
        ("fb_message", "threads"),
    ],
)
def test_trigger_must_suit_the_accounts_platform(client, accounts, trigger, platform):
    body = {"account_id": accounts[platform], "trigger": trigger}
    response = client.post(f"{COMMENT}/activities", headers=READWRITE, json=body)
    error_of(response, 400, "invalid_request", "trigger")


@pytest.mark.parametrize(
    "fields,field",
    [
        ({"status": "paused"}, "status"),
        ({"trigger": "ig_reel"}, "trigger"),
        ({"match": "regex"}, "match"),
        ({"post_scope": "some"}, "post_scope"),
        ({"colour": "red"}, "colour"),
        ({"name": None}, "name"),
        ({"keywords": "price"}, "keywords"),
        ({"keywords": [1]}, "keywords.0"),
        ({"follow_gate": {"enabled": "yes"}}, "follow_gate.enabled"),
        ({"follow_gate": {}}, "follow_gate.enabled"),
    ],
    ids=[
        "status-paused",
        "trigger",
        "match",
        "post_scope",
        "unknown-field",
        "null-name",
        "keywords-string",
        "keyword-number",
        "gate-enabled-string",
        "gate-enabled-missing",
    ],
)
def test_create_refuses_invalid_field(client, accounts, fields, field):
    body = {"account_id": accounts["instagram"], "trigger": "ig_comment", **fields}
    response = client.post(f"{COMMENT}/activities", headers=READWRITE, json=body)
    error_of(response, 400, "invalid_request", field)


def test_generated_activities_satisfy_the_input_rules(client):
    """Every served activity, sent back as input, is accepted: data and rules agree."""
    input_fields = (
        "account_id",
        "trigger",
        "name",
        "keywords",
        "match",
        "public_replies",
        "dm",
        "post_scope",
        "post_ids",
        "follow_gate",
        "start_at",
        "end_at",
    )
    for headers in (READWRITE, AGENCY):
        for activity in client.get(f"{COMMENT}/activities", headers=headers).json()["activities"]:
            body = {name: activity[name] for name in input_fields}
            response = client.post(f"{COMMENT}/activities", headers=headers, json=body)
            assert response.status_code == 201, (activity, response.text)


# --- limits: both sides of every bound ----------------------------------------------------

BOUNDS = [
    # (name, trigger, fields for n, the limit, field named when n = limit + 1)
    ("name", "ig_comment", lambda n: {"name": "n" * n}, 100, "name"),
    ("keywords", "ig_comment", lambda n: {"keywords": [f"k{i}" for i in range(n)]}, 50, "keywords"),
    (
        "public_replies",
        "ig_comment",
        lambda n: {"public_replies": ["Thanks!"] * n},
        10,
        "public_replies",
    ),
    (
        "post_ids",
        "ig_comment",
        lambda n: {"post_scope": "selected", "post_ids": [f"1790{i}" for i in range(n)]},
        50,
        "post_ids",
    ),
    (
        "follow_gate-button_title",
        "ig_comment",
        lambda n: {"dm": [TEXT], "follow_gate": {"enabled": True, "button_title": "b" * n}},
        20,
        "follow_gate.button_title",
    ),
    ("dm-text", "ig_comment", lambda n: {"dm": [{"type": "text", "text": "x" * n}]}, 1000, "dm"),
    (
        "dm-text-over-blocks",
        "ig_comment",
        lambda n: {
            "dm": [{"type": "text", "text": "x" * (n - 400)}, {"type": "text", "text": "y" * 400}]
        },
        1000,
        "dm",
    ),
    (
        "dm-text-with-buttons",
        "ig_comment",
        lambda n: {"dm": [{"type": "text", "text": "x" * n}, BUTTON]},
        640,
        "dm",
    ),
    ("dm-buttons", "ig_comment", lambda n: {"dm": [TEXT] + [BUTTON] * n}, 3, "dm"),
    (
        "button-title",
        "ig_comment",
        lambda n: {"dm": [TEXT, {**BUTTON, "title": "b" * n}]},
        20,
        "dm.1.title",
    ),
    ("card-title", "ig_comment", lambda n: {"dm": [{**CARD, "title": "c" * n}]}, 80, "dm.0.title"),
    (
        "card-subtitle",
        "ig_comment",
        lambda n: {"dm": [{**CARD, "subtitle": "s" * n}]},
        80,
        "dm.0.subtitle",
    ),
    ("cards", "ig_comment", lambda n: {"dm": [CARD] * n}, 10, "dm"),
    (
        "card-buttons",
        "ig_comment",
        lambda n: {"dm": [{**CARD, "buttons": [CARD_BUTTON] * n}]},
        3,
        "dm.0.buttons",
    ),
    (
        "card-button-title",
        "ig_comment",
        lambda n: {"dm": [{**CARD, "buttons": [{**CARD_BUTTON, "title": "b" * n}]}]},
        20,
        "dm.0.buttons.0.title",
    ),
]


@pytest.mark.parametrize(
    "trigger,fields,limit,field", [case[1:] for case in BOUNDS], ids=[case[0] for case in BOUNDS]
)
def test_limit_is_accepted_and_one_more_refused(client, accounts, trigger, fields, limit, field):
    assert create(client, accounts, trigger, **fields(limit)).status_code == 201
    error_of(create(client, accounts, trigger, **fields(limit + 1)), 400, "invalid_request", field)


@pytest.mark.parametrize(
    "fields",
    [
        {"name": ""},
        {"keywords": []},
        {"public_replies": []},
        {"dm": []},
        {"post_ids": []},
        {"follow_gate": {"enabled": False, "button_title": None}},
        {"start_at": None, "end_at": None},
        {"post_ids": None},
    ],
    ids=[
        "name",
        "keywords",
        "public_replies",
        "dm",
        "post_ids",
        "follow_gate",
        "schedule",
        "null-post_ids",
    ],
)
def test_empty_values_are_accepted(client, accounts, fields):
    activity = created(client, accounts, **fields)
    assert activity["post_ids"] is None and activity["dm"] == []


# --- DM shapes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dm",
    [
        [TEXT],
        [TEXT, {"type": "text", "text": "second line"}],
        [TEXT, BUTTON, BUTTON, BUTTON],
        [BUTTON, TEXT],
        [IMAGE],
        [{"type": "image", "image_url": "https://cdn.example/a/b.JPEG?v=2"}],
        [CARD],
        [{**CARD, "subtitle": "New", "buttons": [CARD_BUTTON] * 3}],
        [{"type": "card", "title": "No image"}],
    ],
    ids=[
        "text",
        "texts",
        "text-3-buttons",
        "button-first",
        "image",
        "image-jpeg-query",
        "card",
        "card-full",
        "card-no-image",
    ],
)
def test_dm_shape_is_accepted(client, accounts, dm):
    assert created(client, accounts, dm=dm)["dm"] == dm


@pytest.mark.parametrize(
    "dm,field",
    [
        ([IMAGE, TEXT], "dm"),
        ([TEXT, IMAGE], "dm"),
        ([IMAGE, IMAGE], "dm"),
        ([IMAGE, BUTTON], "dm"),
        ([CARD, TEXT], "dm"),
        ([CARD, BUTTON], "dm"),
        ([CARD, IMAGE], "dm"),
        ([BUTTON], "dm"),
        ([{"type": "video", "url": "https://x.example"}], "dm.0.type"),
        ([{"text": "no type"}], "dm.0.type"),
        ([{**TEXT, "url": "https://x.example"}], "dm.0.url"),
        ([{**IMAGE, "title": "Offer"}], "dm.0.title"),
        ([TEXT, {**BUTTON, "image_url": IMAGE["image_url"]}], "dm.1.image_url"),
        ([{"type": "text"}], "dm.0.text"),
        ([TEXT, {"type": "button", "title": "Go"}], "dm.1.url"),
        ([TEXT, {"type": "button", "url": "https://x.example"}], "dm.1.title"),
        ([{"type": "image"}], "dm.0.image_url"),
        ([{"type": "card", "image_url": CARD["image_url"]}], "dm.0.title"),
        ([{**TEXT, "colour": "red"}], "dm.0.colour"),
        ([{**CARD, "buttons": [{"title": "View"}]}], "dm.0.buttons.0.url"),
    ],
    ids=[
        "image-text",
        "text-image",
        "two-images",
        "image-button",
        "card-text",
        "card-button",
        "card-image",
        "buttons-alone",
        "unknown-type",
        "no-type",
        "text-with-url",
        "image-with-title",
        "button-with-image",
        "text-without-text",
        "button-without-url",
        "button-without-title",
        "image-without-url",
        "card-without-title",
        "unknown-field",
        "card-button-without-url",
    ],
)
def test_dm_shape_is_refused(client, accounts, dm, field):
    error_of(create(client, accounts, dm=dm), 400, "invalid_request", field)


@pytest.mark.parametrize(
    "dm,field",
    [
        ([TEXT, {**BUTTON, "url": "http://shop.example/p/1"}], "dm.1.url"),
        ([TEXT, {**BUTTON, "url": "shop.example/p/1"}], "dm.1.url"),
        ([TEXT, {**BUTTON, "url": "https://"}], "dm.1.url"),
        ([{**CARD, "buttons": [{**CARD_BUTTON, "url": "ftp://x.example"}]}], "dm.0.buttons.0.url"),
        ([{"type": "image", "image_url": "http://cdn.example/a.png"}], "dm.0.image_url"),
        ([{"type": "image", "image_url": "https://cdn.example/a.gif"}], "dm.0.image_url"),
        ([{"type": "image", "image_url": "https://cdn.example/gallery"}], "dm.0.image_url"),
        (
            [{"type": "image", "image_url": "https://drive.google.com/file/d/1x/a.png"}],
            "dm.0.image_url",
        ),
        ([{"type": "image", "image_url": "https://www.dropbox.com/s/abc/a.jpg"}], "dm.0.image_url"),
        ([{"type": "image", "image_url": "https://1drv.ms/i/s!a.jpg"}], "dm.0.image_url"),
        ([{**CARD, "image_url": "https://cdn.example/t.webp"}], "dm.0.image_url"),
    ],
    ids=[
        "button-http",
        "button-no-scheme",
        "button-no-host",
        "card-button-ftp",
        "image-http",
        "image-gif",
        "image-no-file",
        "google-drive",
        "dropbox",
        "onedrive",
        "card-webp",
    ],
)
def test_dm_urls_are_checked(client, accounts, dm, field):
    error_of(create(client, accounts, dm=dm), 400, "invalid_request", field)


# --- trigger and feature compatibility ----------------------------------------------------


@pytest.mark.parametrize(
    "trigger,fields,field",
    [
        ("ig_story", {"public_replies": ["Thanks"]}, "public_replies"),
        ("fb_message", {"public_replies": ["Thanks"]}, "public_replies"),
        ("threads_reply", {"dm": [TEXT]}, "dm"),
        ("ig_story", {"post_scope": "next_post"}, "post_scope"),
        ("ig_live", {"post_scope": "next_post"}, "post_scope"),
        ("fb_comment", {"post_scope": "next_post"}, "post_scope"),
        ("threads_reply", {"post_scope": "next_post"}, "post_scope"),
        ("ig_story", {"follow_gate": {"enabled": True}}, "follow_gate"),
        ("fb_comment", {"follow_gate": {"enabled": True}}, "follow_gate"),
        ("fb_live", {"follow_gate": {"enabled": True}}, "follow_gate"),
        ("threads_reply", {"follow_gate": {"enabled": True}}, "follow_gate"),
        ("ig_comment", {"post_scope": "selected"}, "post_ids"),
        ("ig_comment", {"post_scope": "selected", "post_ids": []}, "post_ids"),
        ("ig_comment", {"post_ids": ["17900000000000001"]}, "post_ids"),
        ("ig_comment", {"post_scope": "next_post", "post_ids": ["17900000000000001"]}, "post_ids"),
    ],
)
def test_feature_unavailable_for_trigger(client, accounts, trigger, fields, field):
    error_of(create(client, accounts, trigger, **fields), 400, "invalid_request", field)


@pytest.mark.parametrize(
    "trigger,fields",
    [
        ("ig_comment", {"post_scope": "next_post"}),
        ("ig_comment", {"dm": [TEXT], "follow_gate": {"enabled": True}}),
        ("ig_live", {"dm": [TEXT], "follow_gate": {"enabled": True}}),
        ("fb_comment", {"follow_gate": {"enabled": False}}),
        ("ig_story", {"dm": [TEXT], "post_scope": "selected", "post_ids": ["18000000000000001"]}),
        ("fb_message", {"dm": [IMAGE]}),
        ("threads_reply", {"public_replies": ["Thanks!"]}),
        ("fb_live", {"public_replies": ["Thanks!"], "dm": [TEXT]}),
    ],
)
def test_feature_available_for_trigger(client, accounts, trigger, fields):
    activity = created(client, accounts, trigger, **fields)
    assert activity["trigger"] == trigger and activity["platform"] == TRIGGER_PLATFORM[trigger]


# --- schedule -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields,field",
    [
        ({"start_at": "2026-11-02T10:00:00"}, "start_at"),
        ({"end_at": "2026-11-02T10:00:00"}, "end_at"),
        ({"start_at": "2026-11-02"}, "start_at"),
        ({"start_at": 1793000000}, "start_at"),
        ({"start_at": "next week"}, "start_at"),
        (
            {"start_at": "2026-11-02T10:00:00+00:00", "end_at": "2026-11-02T09:59:59+00:00"},
            "end_at",
        ),
        (
            {"start_at": "2026-11-02T10:00:00+00:00", "end_at": "2026-11-02T19:00:00+09:00"},
            "end_at",
        ),
    ],
    ids=[
        "naive-start",
        "naive-end",
        "date-only",
        "number",
        "text",
        "end-before-start",
        "end-equals-start-other-offset",
    ],
)
def test_schedule_is_checked(client, accounts, fields, field):
    error_of(create(client, accounts, **fields), 400, "invalid_request", field)


def test_schedule_with_offset_is_returned_in_utc(client, accounts):
    activity = created(
        client, accounts, start_at="2026-11-02T09:00:00+09:00", end_at="2026-11-03T00:00:00Z"
    )
    assert activity["start_at"] == "2026-11-02T00:00:00+00:00"
    assert activity["end_at"] == "2026-11-03T00:00:00+00:00"


# --- post ids and post URLs ---------------------------------------------------------------


def test_post_urls_resolve_to_post_ids(client, accounts):
    posts = client.get(
        f"{COMMENT}/accounts/{accounts['instagram']}/posts", headers=READWRITE
    ).json()["posts"]
    url = posts[0]["permalink"].replace("https://www.", "https://") + "?igsh=abc"
    activity = created(
        client, accounts, post_scope="selected", post_ids=[url, posts[1]["id"], "17900000000000001"]
    )
    assert activity["post_ids"] == [posts[0]["id"], posts[1]["id"], "17900000000000001"]


def test_threads_urls_resolve_on_either_domain(client, accounts):
    post = client.get(f"{COMMENT}/accounts/{accounts['threads']}/posts", headers=READWRITE).json()[
        "posts"
    ][0]
    url = post["permalink"].replace("threads.net", "threads.com")
    activity = created(
        client,
        accounts,
        "threads_reply",
        public_replies=["Hi"],
        post_scope="selected",
        post_ids=[url],
    )
    assert activity["post_ids"] == [post["id"]]


@pytest.mark.parametrize(
    "url",
    [
        "https://www.instagram.com/p/DoesNotExist1/",
        "https://www.threads.net/@someone/post/Abc",
    ],
    ids=["unknown-instagram-post", "other-platform"],
)
def test_unresolvable_post_url_is_refused(client, accounts, url):
    response = create(client, accounts, post_scope="selected", post_ids=["17900000000000001", url])
    error_of(response, 400, "invalid_request", "post_ids.1")


# --- updating -----------------------------------------------------------------------------


def test_update_is_partial_and_moves_updated_at(make_sandbox):
    app = make_sandbox()
    with open_client(app) as http:
        account = http.get(f"{COMMENT}/accounts", headers=READWRITE).json()["accounts"][0]
        body = {
            "account_id": account["id"],
            "trigger": account["supported_triggers"][0],
            "keywords": ["price"],
            "dm": [TEXT],
        }
        before = http.post(f"{COMMENT}/activities", headers=READWRITE, json=body).json()
        app.sandbox.clock.advance(90)
        after = http.patch(
            f"{COMMENT}/activities/{before['id']}", headers=READWRITE, json={"name": "Renamed"}
        ).json()
    assert after["name"] == "Renamed"
    assert after["updated_at"] == iso(ANCHOR + timedelta(seconds=90))
    unchanged = {k: v for k, v in after.items() if k not in ("name", "updated_at")}
    assert unchanged == {k: v for k, v in before.items() if k not in ("name", "updated_at")}


@pytest.mark.parametrize("initial", ["draft", "active"])
@pytest.mark.parametrize("target", ["draft", "active", "paused"])
def test_any_status_moves_to_any_status(client, accounts, initial, target):
    activity = created(client, accounts, status=initial)
    moved = client.patch(
        f"{COMMENT}/activities/{activity['id']}", headers=READWRITE, json={"status": target}
    )
    assert moved.status_code == 200 and moved.json()["status"] == target
    listed = client.get(
        f"{COMMENT}/activities", headers=READWRITE, params={"status": target}
    ).json()["activities"]
    assert activity["id"] in {a["id"] for a in listed}


@pytest.mark.parametrize(
    "initial,change,field",
    [
        ({}, {"account_id": "00000000-0000-4000-8000-000000000000"}, "account_id"),
        ({}, {"status": "archived"}, "status"),
        ({}, {"trigger": "fb_comment"}, "trigger"),
        ({"public_replies": ["Thanks"]}, {"trigger": "ig_story"}, "public_replies"),
        ({"post_scope": "next_post"}, {"trigger": "ig_live"}, "post_scope"),
        ({"dm": [TEXT], "follow_gate": {"enabled": True}}, {"trigger": "ig_story"}, "follow_gate"),
        (
            {"start_at": "2026-11-05T00:00:00+00:00"},
            {"end_at": "2026-11-04T00:00:00+00:00"},
            "end_at",
        ),
        (
            {"end_at": "2026-11-05T00:00:00+00:00"},
            {"start_at": "2026-11-06T00:00:00+00:00"},
            "end_at",
        ),
        ({}, {"post_scope": "selected"}, "post_ids"),
        ({}, {"dm": [IMAGE, TEXT]}, "dm"),
        ({}, {"name": "n" * 101}, "name"),
        ({}, {"start_at": "2026-11-05T00:00:00"}, "start_at"),
    ],
    ids=[
        "account_id",
        "status",
        "trigger-platform",
        "replies-vs-story",
        "next-post-vs-live",
        "gate-vs-story",
        "end-before-start",
        "start-after-end",
        "selected-without-ids",
        "dm-shape",
        "name",
        "naive-start",
    ],
)
def test_update_is_checked_against_the_result(client, accounts, initial, change, field):
    activity = created(client, accounts, **initial)
    response = client.patch(
        f"{COMMENT}/activities/{activity['id']}", headers=READWRITE, json=change
    )
    error_of(response, 400, "invalid_request", field)
    assert (
        client.get(f"{COMMENT}/activities/{activity['id']}", headers=READWRITE).json()["activity"]
        == activity
    )


def test_update_leaving_selected_drops_post_ids(client, accounts):
    activity = created(client, accounts, post_scope="selected", post_ids=["17900000000000001"])
    moved = client.patch(
        f"{COMMENT}/activities/{activity['id']}", headers=READWRITE, json={"post_scope": "all"}
    ).json()
    assert moved["post_scope"] == "all" and moved["post_ids"] is None


def test_update_clears_the_schedule_with_null(client, accounts):
    activity = created(client, accounts, start_at="2026-11-05T00:00:00Z")
    moved = client.patch(
        f"{COMMENT}/activities/{activity['id']}", headers=READWRITE, json={"start_at": None}
    ).json()
    assert moved["start_at"] is None


@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
@pytest.mark.parametrize(
    "activity_id,status,code,field",
    [
        ("00000000-0000-4000-8000-000000000000", 404, "not_found", None),
        ("123", 400, "invalid_request", "id"),
    ],
    ids=["unknown", "malformed"],
)
def test_activity_id_is_checked(client, method, activity_id, status, code, field):
    response = client.request(
        method,
        f"{COMMENT}/activities/{activity_id}",
        headers=READWRITE,
        json={"name": "x"} if method == "PATCH" else None,
    )
    error_of(response, status, code, field)


# --- deleting -----------------------------------------------------------------------------


def test_delete_removes_the_activity_and_its_logs(make_sandbox):
    with open_client(make_sandbox()) as http:
        scope = workspace_id(http)
        activities = http.get(f"{COMMENT}/activities", headers=READWRITE).json()["activities"]
        busiest = max(activities, key=lambda a: sum(a["stats"].values()))
        own, own_total = all_logs(http, activity_id=busiest["id"])
        assert own_total == len(own) > 0
        stats_before = http.get(f"{COMMENT}/stats", headers=READWRITE, params={"days": 90}).json()
        truth_before = truth(http, scope)
        _, total_before = all_logs(http)

        answer = http.delete(f"{COMMENT}/activities/{busiest['id']}", headers=READWRITE)
        assert answer.status_code == 200
        assert answer.json() == {"deleted": True, "id": busiest["id"]}

        path = f"{COMMENT}/activities/{busiest['id']}"
        for method in ("GET", "PATCH", "DELETE"):
            response = http.request(
                method, path, headers=READWRITE, json={"name": "x"} if method == "PATCH" else None
            )
            error_of(response, 404, "not_found")
        assert all_logs(http, activity_id=busiest["id"])[1] == 0
        _, total_after = all_logs(http)
        assert total_after == total_before - own_total
        truth_after = truth(http, scope)
        assert truth_after["activities"] == truth_before["activities"] - 1
        assert truth_after["trigger_logs"] == truth_before["trigger_logs"] - own_total
        assert busiest["id"] not in truth_ids(http, scope, "activities")

        stats_after = http.get(f"{COMMENT}/stats", headers=READWRITE, params={"days": 90}).json()
        recent = [log for log in own if log["created_at"][:10] >= days_back(89)]
        removed = Counter(_stat_of(log) for log in recent)
        for name in ("public_replies", "dms", "failed"):
            assert stats_after["totals"][name] == stats_before["totals"][name] - removed[name]


def test_truth_rows_are_the_activities_as_served_after_each_change(make_sandbox):
    with open_client(make_sandbox()) as http:
        scope = workspace_id(http)
        rows = f"/_sandbox/truth/comment/{scope}/activities/rows"
        listed = http.get(f"{COMMENT}/activities", headers=READWRITE).json()["activities"]
        assert http.get(rows).json()["rows"] == listed
        account = http.get(f"{COMMENT}/accounts", headers=READWRITE).json()["accounts"][0]
        body = {"account_id": account["id"], "trigger": account["supported_triggers"][0]}
        made = http.post(f"{COMMENT}/activities", headers=READWRITE, json=body).json()
        paused = http.patch(
            f"{COMMENT}/activities/{made['id']}", headers=READWRITE, json={"status": "paused"}
        ).json()
        assert http.get(rows).json()["rows"][0] == paused
        http.delete(f"{COMMENT}/activities/{made['id']}", headers=READWRITE)
        assert http.get(rows).json()["rows"] == listed
        assert http.get("/_sandbox/truth/conversation/default/channels/rows").status_code == 404


def test_deleting_an_activity_takes_its_logs_off_an_older_day_everywhere(make_sandbox):
    """The discrepancy a sync's checks must catch: logs of a landed, closed day vanish, and
    the day's stats (derived from the logs) drop with them."""
    with open_client(make_sandbox()) as http:
        scope = workspace_id(http)
        activities = http.get(f"{COMMENT}/activities", headers=READWRITE).json()["activities"]
        busiest = max(activities, key=lambda a: sum(a["stats"].values()))
        own = Counter(
            log["created_at"][:10] for log in all_logs(http, activity_id=busiest["id"])[0]
        )
        day = max(d for d in own if days_back(89) <= d <= days_back(2))  # closed, in the stats
        before = http.get(f"/_sandbox/truth/comment/{scope}/trigger_logs/days").json()["days"]

        assert http.delete(f"{COMMENT}/activities/{busiest['id']}", headers=READWRITE).is_success

        after = http.get(f"/_sandbox/truth/comment/{scope}/trigger_logs/days").json()["days"]
        assert after[day] == before[day] - own[day]
        assert {d: before[d] - after[d] for d in before if before[d] != after[d]} == dict(own)
        stats = http.get(f"{COMMENT}/stats", headers=READWRITE, params={"days": 90}).json()
        that_day = next(d for d in stats["daily"] if d["date"] == day)
        assert that_day["public_replies"] + that_day["dms"] + that_day["failed"] == after[day]
        assert all_logs(http, days=90)[1] == sum(after[d] for d in after if d >= days_back(89))
        assert sum(after.values()) == truth(http, scope)["trigger_logs"]


def _stat_of(log: dict) -> str:
    if log["status"] == "failed":
        return "failed"
    return "public_replies" if log["action"] == "public_reply" else "dms"


# --- listing activities and their stats ---------------------------------------------------


@pytest.mark.parametrize("status", ["draft", "active", "paused"])
def test_activities_filter_by_status(client, status):
    listed = client.get(
        f"{COMMENT}/activities", headers=READWRITE, params={"status": status}
    ).json()["activities"]
    assert listed and all(a["status"] == status for a in listed)


def test_activities_filter_by_account(client, accounts):
    everything = client.get(f"{COMMENT}/activities", headers=READWRITE).json()["activities"]
    for account_id in accounts.values():
        listed = client.get(
            f"{COMMENT}/activities", headers=READWRITE, params={"account_id": account_id}
        ).json()["activities"]
        assert listed == [a for a in everything if a["account_id"] == account_id]
    assert (
        client.get(
            f"{COMMENT}/activities", headers=READWRITE, params={"account_id": "nobody"}
        ).json()["activities"]
        == []
    )


def test_activities_refuse_unknown_status(client):
    response = client.get(f"{COMMENT}/activities", headers=READWRITE, params={"status": "on"})
    error_of(response, 400, "invalid_request", "status")


def test_activity_stats_count_its_successful_logs(client):
    logs, _ = all_logs(client, status="success")
    counted = Counter((log["activity_id"], log["action"]) for log in logs)
    activities = client.get(f"{COMMENT}/activities", headers=READWRITE).json()["activities"]
    assert any(a["stats"]["dms_sent"] for a in activities)
    for activity in activities:
        assert activity["stats"] == {
            "public_replies_sent": counted[(activity["id"], "public_reply")],
            "dms_sent": counted[(activity["id"], "dm")],
        }


def test_activity_detail_trend_is_14_days_of_successful_logs(client):
    activities = client.get(
        f"{COMMENT}/activities", headers=READWRITE, params={"status": "active"}
    ).json()["activities"]
    busiest = max(activities, key=lambda a: sum(a["stats"].values()))
    detail = client.get(f"{COMMENT}/activities/{busiest['id']}", headers=READWRITE).json()
    assert detail["activity"] == busiest
    assert [d["date"] for d in detail["daily"]] == [days_back(n) for n in range(13, -1, -1)]
    logs, _ = all_logs(client, activity_id=busiest["id"], status="success", days=14)
    per_day = Counter(log["created_at"][:10] for log in logs)
    assert {d["date"]: d["successful_triggers"] for d in detail["daily"]} == {
        d["date"]: per_day[d["date"]] for d in detail["daily"]
    }
    assert sum(per_day.values()) > 0


# --- trigger logs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params,field",
    [
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"page": -1}, "page"),
        ({"page": "1.5"}, "page"),
        ({"days": 0}, "days"),
        ({"days": 366}, "days"),
        ({"days": "week"}, "days"),
        ({"status": "ok"}, "status"),
    ],
)
def test_logs_refuse_out_of_bounds(client, params, field):
    error_of(
        client.get(f"{COMMENT}/logs", headers=READWRITE, params=params),
        400,
        "invalid_request",
        field,
    )


@pytest.mark.parametrize(
    "params,limit",
    [
        ({"limit": 1}, 1),
        ({"limit": 200}, 200),
        ({}, 50),
        ({"page": 0, "days": 1}, 50),
        ({"days": 365}, 50),
    ],
)
def test_logs_accept_the_bounds(client, params, limit):
    body = client.get(f"{COMMENT}/logs", headers=READWRITE, params=params).json()
    assert body["limit"] == limit and body["page"] == params.get("page", 0)
    assert len(body["logs"]) == min(limit, body["total"])


def test_logs_pages_cover_every_row_once_newest_first(client):
    scope = workspace_id(client)
    logs, total = all_logs(client)
    ids = [log["id"] for log in logs]
    assert len(ids) == total == len(set(ids)) == truth(client, scope)["trigger_logs"]
    assert ids == truth_ids(client, scope, "trigger_logs")
    stamps = [log["created_at"] for log in logs]
    assert stamps == sorted(stamps, reverse=True)
    assert days_back(364) <= stamps[-1][:10] and stamps[0] <= iso(ANCHOR)
    assert all(set(log) == TRIGGER_LOG_FIELDS for log in logs)
    assert logs == all_logs(client, days=365)[0]


def test_logs_beyond_the_last_page_are_empty(client):
    body = client.get(f"{COMMENT}/logs", headers=READWRITE, params={"page": 10**9}).json()
    assert body["logs"] == [] and body["total"] > 0


def test_logs_rows_are_consistent(client):
    logs, _ = all_logs(client)
    activities = {
        a["id"]: a
        for a in client.get(f"{COMMENT}/activities", headers=READWRITE).json()["activities"]
    }
    for log in logs:
        activity = activities[log["activity_id"]]
        assert log["activity_name"] == activity["name"]
        assert log["account_id"] == activity["account_id"]
        assert (log["status"] == "failed") == (log["error"] is not None)
        assert log["action"] in ("public_reply", "dm")
        assert (log["post_id"] is None) == (log["trigger"] == "fb_message")
        assert not (log["action"] == "dm" and log["trigger"] == "threads_reply")
    assert 0.01 < sum(log["status"] == "failed" for log in logs) / len(logs) < 0.08


@pytest.mark.parametrize("name", ["status", "activity_id", "account_id", "days"])
def test_logs_filter(client, name):
    activities = client.get(f"{COMMENT}/activities", headers=READWRITE).json()["activities"]
    activity = max(activities, key=lambda a: sum(a["stats"].values()))
    value = {
        "status": "failed",
        "activity_id": activity["id"],
        "account_id": activity["account_id"],
        "days": 10,
    }[name]
    everything, _ = all_logs(client)
    wanted = [
        log
        for log in everything
        if (
            log["created_at"][:10] >= days_back(value - 1) if name == "days" else log[name] == value
        )
    ]
    logs, total = all_logs(client, **{name: value})
    assert logs == wanted and total == len(wanted) > 0


def test_logs_filter_on_unknown_activity_is_empty(client):
    body = client.get(
        f"{COMMENT}/logs",
        headers=READWRITE,
        params={"activity_id": "00000000-0000-4000-8000-000000000000"},
    ).json()
    assert body == {"logs": [], "total": 0, "page": 0, "limit": 50}


# --- stats --------------------------------------------------------------------------------


@pytest.mark.parametrize("days", [0, 91, "seven"])
def test_stats_refuse_days(client, days):
    error_of(
        client.get(f"{COMMENT}/stats", headers=READWRITE, params={"days": days}),
        400,
        "invalid_request",
        "days",
    )


@pytest.mark.parametrize("days,expected", [(None, 7), (1, 1), (90, 90)])
def test_stats_days_oldest_first_ending_today(client, days, expected):
    params = {} if days is None else {"days": days}
    body = client.get(f"{COMMENT}/stats", headers=READWRITE, params=params).json()
    assert body["days"] == expected
    assert [d["date"] for d in body["daily"]] == [days_back(n) for n in range(expected - 1, -1, -1)]
    for name in ("public_replies", "dms", "failed"):
        assert body["totals"][name] == sum(d[name] for d in body["daily"])


def test_stats_add_up_the_logs_of_each_day(client):
    stats = client.get(f"{COMMENT}/stats", headers=READWRITE, params={"days": 30}).json()
    logs, _ = all_logs(client, days=30)
    counted = Counter((log["created_at"][:10], _stat_of(log)) for log in logs)
    for day in stats["daily"]:
        for name in ("public_replies", "dms", "failed"):
            assert day[name] == counted[(day["date"], name)], day
    assert stats["totals"]["public_replies"] > 0


# --- ground truth, live traffic, determinism ----------------------------------------------


@pytest.mark.parametrize("headers", [READWRITE, AGENCY], ids=["demo", "agency"])
def test_truth_matches_the_api(client, headers):
    scope = workspace_id(client, headers)
    accounts = client.get(f"{COMMENT}/accounts", headers=headers).json()["accounts"]
    activities = client.get(f"{COMMENT}/activities", headers=headers).json()["activities"]
    posts = [
        post["id"]
        for account in accounts
        for kind in ("posts", "story")
        for post in client.get(
            f"{COMMENT}/accounts/{account['id']}/posts", headers=headers, params={"kind": kind}
        ).json()["posts"]
    ]
    assert truth(client, scope) == {
        "workspace": 1,
        "accounts": len(accounts),
        "posts": len(posts),
        "activities": len(activities),
        "activity_daily": 14 * len(activities),
        "trigger_logs": all_logs(client, headers)[1],
        "daily_stats": 90,
    }
    assert truth_ids(client, scope, "accounts") == [a["id"] for a in accounts]
    assert sorted(truth_ids(client, scope, "activities")) == sorted(a["id"] for a in activities)
    assert truth_ids(client, scope, "posts") == posts
    assert client.get(f"/_sandbox/truth/comment/{scope}/nothing/ids").status_code == 404


def test_truth_per_day_adds_up_to_the_logs_and_the_stats(client):
    scope = workspace_id(client)
    days = client.get(f"/_sandbox/truth/comment/{scope}/trigger_logs/days").json()["days"]
    assert list(days) == [days_back(n) for n in range(364, -1, -1)]
    assert sum(days.values()) == truth(client, scope)["trigger_logs"]
    stats = client.get(f"{COMMENT}/stats", headers=READWRITE, params={"days": 90}).json()
    assert {d["date"]: d["public_replies"] + d["dms"] + d["failed"] for d in stats["daily"]} == {
        day: days[day] for day in list(days)[-90:]
    }
    daily = client.get(f"/_sandbox/truth/comment/{scope}/daily_stats/days").json()["days"]
    assert daily == {d["date"]: 1 for d in stats["daily"]}
    for stream in ("activities", "nothing"):
        assert client.get(f"/_sandbox/truth/comment/{scope}/{stream}/days").status_code == 404


def test_live_logs_arrive_as_the_clock_moves(make_sandbox):
    app = make_sandbox(frozen=False, rate_limits=False)
    with open_client(app) as http:
        scope = workspace_id(http)
        before = http.get(f"{COMMENT}/logs", headers=READWRITE).json()["total"]
        today_before = http.get(f"{COMMENT}/stats", headers=READWRITE, params={"days": 1}).json()[
            "totals"
        ]
        app.sandbox.clock.advance(120)  # 30 arrivals per minute by default
        head = http.get(f"{COMMENT}/logs", headers=READWRITE).json()
        arrived = head["total"] - before
        assert 60 <= arrived <= 62
        assert all(log["created_at"] > iso(ANCHOR) for log in head["logs"])
        assert head["logs"][0]["created_at"] <= iso(app.sandbox.clock.now())
        today_after = http.get(f"{COMMENT}/stats", headers=READWRITE, params={"days": 1}).json()[
            "totals"
        ]
        assert sum(today_after.values()) - sum(today_before.values()) == arrived
        assert truth(http, scope)["trigger_logs"] == head["total"]


def test_frozen_sandbox_has_no_live_logs(make_sandbox):
    app = make_sandbox()
    with open_client(app) as http:
        before = http.get(f"{COMMENT}/logs", headers=READWRITE).json()["total"]
        app.sandbox.clock.advance(600)
        assert http.get(f"{COMMENT}/logs", headers=READWRITE).json()["total"] == before


def _snapshot(app: SandboxApp) -> tuple:
    with open_client(app) as http:
        return (
            http.get(f"{COMMENT}/logs", headers=READWRITE).json(),
            http.get(f"{COMMENT}/activities", headers=AGENCY).json(),
            http.get(f"{COMMENT}/accounts", headers=READWRITE).json(),
        )


def test_same_seed_same_data_other_seed_other_data(make_sandbox):
    first = _snapshot(make_sandbox())
    assert _snapshot(make_sandbox()) == first
    other = _snapshot(make_sandbox(seed=8))
    assert all(a != b for a, b in zip(other, first, strict=True))


# --- no input yields a 500 ----------------------------------------------------------------


@pytest.mark.parametrize(
    "content,field",
    [
        (b"{not json", "body"),
        (b"[]", "body"),
        (b"null", "body"),
        (b'"text"', "body"),
        (b'{"account_id": 5, "trigger": "ig_comment"}', "account_id"),
        (b'{"account_id": "x", "trigger": "ig_comment", "dm": {"type": "text"}}', "dm"),
        (b'{"account_id": "x", "trigger": "ig_comment", "dm": [null]}', "dm.0"),
    ],
    ids=["malformed", "array", "null", "string", "number-id", "dm-object", "dm-null-block"],
)
def test_odd_bodies_are_400(client, content, field):
    response = client.post(
        f"{COMMENT}/activities",
        headers={**READWRITE, "Content-Type": "application/json"},
        content=content,
    )
    error_of(response, 400, "invalid_request", field)


def test_unknown_path_is_404_in_the_error_shape(client):
    error_of(client.get(f"{COMMENT}/nothing", headers=READWRITE), 404, "not_found")


def test_days_covers_whole_utc_days(client):
    """`days=1` is today since 00:00 UTC, not the last 24 hours (sandbox choice)."""
    logs, _ = all_logs(client, days=1)
    assert logs and {log["created_at"][:10] for log in logs} == {TODAY.isoformat()}
    assert date.fromisoformat(all_logs(client, days=2)[0][-1]["created_at"][:10]) == (
        TODAY - timedelta(days=1)
    )
