"""Conformance of the conversation service sandbox to the service's documented behaviour.

Calls go through `paths.OPERATIONS`, the one table of methods and paths. Tests that only read
share one frozen sandbox (`shared`); tests that change state share another (`mutable`) and
each sets up the state it starts from; tests that need other settings build their own
(`make_sandbox`). Members to act on are picked from the service's columns; every assertion
goes through HTTP.
"""

from __future__ import annotations

import base64
import csv
import io
import time
from collections import Counter
from datetime import datetime, timedelta

import numpy as np
import pytest
from starlette.testclient import TestClient

from sandbox.app import build_app
from sandbox.config import SandboxConfig
from sandbox.conversation.members import PROCESSING_STATES
from sandbox.conversation.models import BACKUP_STATES
from sandbox.conversation.paths import OPERATIONS
from tests.conftest import ANCHOR
from tests.constants import APIKEY

BASES = {"default": "/conversation", "jp": "/conversation-jp"}
REGIONS = tuple(BASES)
PUBLIC_URL = SandboxConfig().public_url

# Field sets exactly as the service documents them.
CHANNEL_FIELDS = {
    "id",
    "uuid",
    "name",
    "type",
    "status",
    "language_code",
    "timezone",
    "external_channel_id",
    "external_access_token_expired_at",
    "broadcast_enabled",
    "user_recognition_enabled",
    "created_at",
    "updated_at",
}
CHANNEL_PAGE_FIELDS = {
    "id",
    "name",
    "type",
    "status",
    "language_code",
    "timezone",
    "external_channel_id",
    "created_at",
    "updated_at",
}
MEMBER_BY_EXTERNAL_FIELDS = {
    "account_manager",
    "assign_type",
    "avatar",
    "birthday",
    "channel_id",
    "city",
    "company",
    "connect_id",
    "country",
    "customer_id",
    "display_email",
    "display_mobile",
    "display_name",
    "engagement_level",
    "external_member_id",
    "gender",
    "id",
    "location",
    "member_level",
    "name",
    "original_email",
    "original_mobile",
    "original_name",
    "processing_state",
    "star_mark",
    "status",
    "type",
}
MEMBER_BY_ID_FIELDS = {
    "id",
    "account_manager",
    "assign_type",
    "avatar",
    "birthday",
    "city",
    "company",
    "connect_id",
    "country",
    "created_at",
    "custom_id",
    "display_name",
    "email",
    "engagement_level",
    "external_channel_id",
    "external_member_id",
    "gender",
    "last_member_message_send",
    "last_message_at",
    "location",
    "member_level",
    "mobile",
    "name",
    "note",
    "original_email",
    "original_mobile",
    "original_name",
    "processing_state",
    "star_mark",
    "status",
    "type",
    "updated_at",
}
TEAM_FIELDS = {
    "id",
    "name",
    "description",
    "category",
    "external_team_id",
    "routing_rule",
    "editable",
}
TEAM_LIST_FIELDS = TEAM_FIELDS - {"editable"}
USER_FIELDS = {
    "id",
    "org_id",
    "role_id",
    "inviter_id",
    "name",
    "chat_name",
    "avatar",
    "email",
    "external_user_id",
    "created_at",
    "role_name",
    "role_type",
    "on_duty_status",
    "status",
    "type",
    "is_internal_user",
}
USER_REDUCED_FIELDS = USER_FIELDS - {"email", "org_id", "role_id", "inviter_id"}
TEAM_USER_FIELDS = {
    "id",
    "account_id",
    "org_id",
    "role_id",
    "inviter_id",
    "avatar",
    "chat_name",
    "external_user_id",
    "language_code",
    "mobile",
    "name",
    "on_duty_status",
    "status",
    "enable_popup_notification",
    "enable_sound_notification",
    "created_at",
    "updated_at",
    "deleted_at",
}
BACKUP_FIELDS = {"backup_id", "created_at", "download_url", "state"}
CSV_COLUMNS = [
    "message_uuid",
    "conversation_id",
    "channel_id",
    "member_id",
    "sender_type",
    "sender_id",
    "message_type",
    "text",
    "url",
    "mime_type",
    "timestamp",
]
YEAR_WINDOW = {
    "started_at": (ANCHOR - timedelta(days=365)).isoformat(),
    "ended_at": (ANCHOR + timedelta(seconds=1)).isoformat(),
}


# --- helpers


def _client():
    # The settings of conftest's `sandbox_app`, built once per module (a build per test of
    # the ~400 here would cost minutes once all three services are in).
    app = build_app(SandboxConfig(frozen=True, now=ANCHOR, task_phase_seconds=0.05))
    with TestClient(app, base_url="http://sandbox") as client:
        yield client
    app.sandbox.webhooks.close()


@pytest.fixture(scope="module")
def shared():
    """For tests that only read."""
    yield from _client()


@pytest.fixture(scope="module")
def mutable():
    """For tests that change state; each sets up the state it starts from."""
    yield from _client()


def call(client, region: str, operation: str, *, headers=APIKEY, **kwargs):
    """Call an operation by its id; path parameters are keyword arguments."""
    method, path = OPERATIONS[operation]
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    url = BASES[region] + path.format(**{name: kwargs.pop(name) for name in names})
    return client.request(method, url, headers=headers, **kwargs)


def service(app, region: str):
    return app.services[("conversation", region)]


def member(client, region: str, **where) -> tuple[int, int]:
    """(channel_id, member_id) of the first member matching column values, e.g. state=3."""
    svc = service(client.app, region)
    table = svc.members.table
    keep = np.ones(table.size, bool)
    for column, value in where.items():
        keep &= table[column] == value
    row = int(np.flatnonzero(keep)[0])
    return svc.directory.channels[table["channel"][row]]["id"], svc.members.member_id(row)


def channel_of_type(client, region: str, kind: str, wanted: bool = True) -> int:
    channels = call(client, region, "list_channels").json()["channels"]
    return next(c["id"] for c in channels if (c["type"] == kind) == wanted)


def truth(client, region: str) -> dict:
    return client.get("/_sandbox/truth").json()["conversation"][region]


def truth_ids(client, region: str, stream: str) -> list:
    return client.get(f"/_sandbox/truth/conversation/{region}/{stream}/ids").json()["ids"]


def assert_error(response, status: int, code: str, field: str | None = None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    if field is not None:
        assert error["field"] == field


def wait_completed(client, region: str, backup_id: int) -> dict:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        detail = call(client, region, "get_backup_detail", backup_id=backup_id).json()
        if detail["state"] == "completed":
            return detail
        time.sleep(0.01)
    raise AssertionError(f"backup {backup_id} did not complete")


def backup_rows(client, region: str, body: dict) -> list[dict]:
    response = call(client, region, "trigger_messages_backup", json=body)
    assert response.status_code == 202, response.text
    detail = wait_completed(client, region, response.json()["backup_id"])
    download = client.get(detail["download_url"].removeprefix(PUBLIC_URL), headers=APIKEY)
    assert download.status_code == 200
    assert download.headers["content-type"] == "text/csv; charset=utf-8"
    reader = csv.reader(io.StringIO(download.content.decode("utf-8"), newline=""))
    assert next(reader) == CSV_COLUMNS
    return [dict(zip(CSV_COLUMNS, row, strict=True)) for row in reader]


# --- document, auth, regions


@pytest.mark.parametrize("region", REGIONS)
def test_openapi_lists_exactly_the_22_operations(shared, region):
    document = shared.get(f"{BASES[region]}/openapi.json").json()
    found = {
        (method.upper(), path): op["operationId"]
        for path, item in document["paths"].items()
        for method, op in item.items()
    }
    assert found == {route: name for name, route in OPERATIONS.items()}
    assert len(found) == 22


@pytest.mark.parametrize("region", REGIONS)
@pytest.mark.parametrize(
    "headers", [{}, {"apikey": "wrong"}, {"apikey": ""}, {"Authorization": "Bearer demo-apikey"}]
)
@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_every_operation_needs_the_apikey(shared, region, headers, operation):
    method, path = OPERATIONS[operation]
    url = BASES[region] + path.replace("{", "").replace("}", "")  # ids don't matter: auth first
    response = shared.request(method, url, headers=headers, json={})
    assert response.status_code == 401
    assert response.json() == {
        "error": {"code": "unauthorized", "message": "missing or invalid apikey header"}
    }


@pytest.mark.parametrize("region", REGIONS)
def test_backup_download_needs_the_apikey(shared, region):
    response = shared.get(f"{BASES[region]}/v1/backups/1/download")
    assert_error(response, 401, "unauthorized")


def test_regions_hold_different_data(shared):
    for stream in ("channels", "teams", "users", "messages", "members"):
        assert set(truth_ids(shared, "default", stream)).isdisjoint(
            truth_ids(shared, "jp", stream)
        ), stream
    jp = call(shared, "jp", "list_channels").json()["channels"]
    default = call(shared, "default", "list_channels").json()["channels"]
    assert all(c["timezone"] == "Asia/Tokyo" for c in jp)
    assert sum(c["language_code"] == "ja" for c in jp) > len(jp) / 2
    assert len({c["language_code"] for c in default}) >= 4


def test_jp_region_writes_japanese(shared):
    def japanese_share(region: str) -> float:
        rows = backup_rows(shared, region, YEAR_WINDOW)
        kana = [any("\u3040" <= ch <= "\u30ff" for ch in row["text"]) for row in rows]
        return sum(kana) / len(rows)

    assert japanese_share("jp") > 0.4 > 0.25 > japanese_share("default")


def test_same_seed_same_data_other_seed_other_data(make_sandbox):
    first, second, other = make_sandbox(), make_sandbox(), make_sandbox(seed=8)
    ids = [
        service(app, "default").truth_ids("default", "messages") for app in (first, second, other)
    ]
    assert ids[0] == ids[1]
    assert set(ids[0]).isdisjoint(ids[2])


# --- channels and pagination


@pytest.mark.parametrize("region", REGIONS)
def test_list_channels_returns_full_records(shared, region):
    channels = call(shared, region, "list_channels").json()["channels"]
    assert 6 <= len(channels) <= 10
    assert all(set(c) == CHANNEL_FIELDS for c in channels)
    assert [c["id"] for c in channels] == truth_ids(shared, region, "channels")
    assert {"line", "fb"} <= {c["type"] for c in channels}
    assert {c["status"] for c in channels} == {"connected", "disconnected"}


@pytest.mark.parametrize("region", REGIONS)
def test_list_channels_paginated_returns_reduced_records(shared, region):
    body = call(shared, region, "list_channels_paginated").json()
    assert set(body) == {"channels", "cursor"}
    assert all(set(c) == CHANNEL_PAGE_FIELDS for c in body["channels"])
    assert body["cursor"] == {"after": "", "before": ""}  # all on one page: no more pages


LISTS = [("list_channels_paginated", "channels"), ("list_teams", "teams"), ("list_users", "users")]


@pytest.mark.parametrize("region", REGIONS)
@pytest.mark.parametrize(("operation", "key"), LISTS)
@pytest.mark.parametrize("limit", [1, 7, 1000])
@pytest.mark.parametrize("token_name", ["after", "cursor"])
def test_paging_visits_every_row_once_in_id_order(
    shared, region, operation, key, limit, token_name
):
    seen, params = [], {"limit": limit}
    while True:
        body = call(shared, region, operation, params=params).json()
        assert len(body[key]) <= limit
        seen += [row["id"] for row in body[key]]
        if not body["cursor"]["after"]:
            break
        params = {"limit": limit, token_name: body["cursor"]["after"]}
    assert seen == truth_ids(shared, region, key)


@pytest.mark.parametrize(("operation", "key"), LISTS)
def test_before_goes_back_one_page(shared, operation, key):
    first = call(shared, "default", operation, params={"limit": 2}).json()
    second = call(
        shared, "default", operation, params={"limit": 2, "after": first["cursor"]["after"]}
    ).json()
    back = call(
        shared, "default", operation, params={"limit": 2, "before": second["cursor"]["before"]}
    ).json()
    assert first["cursor"]["before"] == ""
    assert second["cursor"]["before"] != ""
    assert back == first


def test_last_page_has_no_after_and_before_reaches_the_end(shared):
    ids = truth_ids(shared, "default", "users")
    last = call(
        shared,
        "default",
        "list_users",
        params={
            "limit": 10,
            "before": base64.urlsafe_b64encode(f"id:{ids[-1] + 1}".encode()).decode(),
        },
    ).json()
    assert [u["id"] for u in last["users"]] == ids[-10:]
    assert last["cursor"]["after"] == ""


def test_default_limit_is_100(make_sandbox):
    with TestClient(make_sandbox(scale="medium"), base_url="http://sandbox") as client:
        body = call(client, "default", "list_users").json()
    assert len(body["users"]) == 100
    assert body["cursor"]["after"] != ""


@pytest.mark.parametrize(("operation", "key"), LISTS)
@pytest.mark.parametrize(
    ("limit", "status"), [(0, 400), (1, 200), (1000, 200), (1001, 400), (-1, 400), ("ten", 400)]
)
def test_limit_bounds(shared, operation, key, limit, status):
    response = call(shared, "default", operation, params={"limit": limit})
    if status == 400:
        assert_error(response, 400, "invalid_request", "limit")
    else:
        assert response.status_code == 200
        assert len(response.json()[key]) == min(limit, len(truth_ids(shared, "default", key)))


@pytest.mark.parametrize("token_name", ["cursor", "after", "before"])
@pytest.mark.parametrize(
    "token",
    [
        "garbage!!",
        "",
        "bm9wZQ",  # "nope"
        base64.urlsafe_b64encode(b"id:x").decode(),
        base64.urlsafe_b64encode(b"page:1").decode(),
    ],
)
def test_bad_token_is_400_cursor(shared, token_name, token):
    response = call(shared, "default", "list_users", params={token_name: token})
    assert_error(response, 400, "invalid_request", "cursor")


def test_two_tokens_at_once_is_400_cursor(shared):
    token = call(shared, "default", "list_users", params={"limit": 1}).json()["cursor"]["after"]
    response = call(shared, "default", "list_users", params={"after": token, "before": token})
    assert_error(response, 400, "invalid_request", "cursor")


# --- members


@pytest.mark.parametrize("region", REGIONS)
def test_member_forms_have_exactly_the_spec_fields(shared, region):
    channel_id, member_id = member(shared, region)
    by_id = call(
        shared, region, "get_member_by_id", channel_id=channel_id, member_id=member_id
    ).json()
    assert set(by_id) == MEMBER_BY_ID_FIELDS
    by_external = call(
        shared,
        region,
        "get_member_by_channel_id_and_external_id",
        channel_id=channel_id,
        external_member_id=by_id["external_member_id"],
    ).json()
    assert set(by_external) == MEMBER_BY_EXTERNAL_FIELDS
    assert by_external["id"] == member_id and by_external["channel_id"] == channel_id
    common = MEMBER_BY_ID_FIELDS & MEMBER_BY_EXTERNAL_FIELDS
    assert {k: by_id[k] for k in common} == {k: by_external[k] for k in common}
    assert isinstance(by_id["star_mark"], bool)
    channels = {c["id"]: c for c in call(shared, region, "list_channels").json()["channels"]}
    assert by_id["type"] == channels[channel_id]["type"]
    assert by_id["external_channel_id"] == channels[channel_id]["external_channel_id"]


def test_member_last_message_times_follow_the_messages(shared):
    rows = backup_rows(shared, "default", YEAR_WINDOW)
    last = {}
    for row in rows:
        last.setdefault(row["member_id"], {})[row["sender_type"]] = row["timestamp"]
        last[row["member_id"]]["any"] = row["timestamp"]
    channel = {row["member_id"]: row["channel_id"] for row in rows}
    for member_id in list(last)[:40]:
        found = call(
            shared,
            "default",
            "get_member_by_id",
            channel_id=channel[member_id],
            member_id=member_id,
        ).json()
        assert found["last_message_at"] == last[member_id]["any"]
        assert found["last_member_message_send"] == last[member_id].get("member")
        assert found["created_at"] < last[member_id]["any"]


@pytest.mark.parametrize("case", ["other_channel", "unknown_member", "unknown_channel"])
def test_member_lookups_404(shared, case):
    channel_id, member_id = member(shared, "default")
    other = next(
        c["id"]
        for c in call(shared, "default", "list_channels").json()["channels"]
        if c["id"] != channel_id
    )
    channel_id, member_id = {
        "other_channel": (other, member_id),
        "unknown_member": (channel_id, 1),
        "unknown_channel": (1, member_id),
    }[case]
    response = call(
        shared, "default", "get_member_by_id", channel_id=channel_id, member_id=member_id
    )
    assert_error(response, 404, "not_found")
    response = call(
        shared, "default", "get_member_assignment", channel_id=channel_id, member_id=member_id
    )
    assert_error(response, 404, "not_found")


@pytest.mark.parametrize("case", ["other_channel", "unknown_external_id", "unknown_channel"])
def test_member_by_external_id_404(shared, case):
    channel_id, member_id = member(shared, "default")
    external = call(
        shared, "default", "get_member_by_id", channel_id=channel_id, member_id=member_id
    ).json()["external_member_id"]
    other = next(
        c["id"]
        for c in call(shared, "default", "list_channels").json()["channels"]
        if c["id"] != channel_id
    )
    channel_id, external = {
        "other_channel": (other, external),
        "unknown_external_id": (channel_id, "no-such-member"),
        "unknown_channel": (1, external),
    }[case]
    response = call(
        shared,
        "default",
        "get_member_by_channel_id_and_external_id",
        channel_id=channel_id,
        external_member_id=external,
    )
    assert_error(response, 404, "not_found")


@pytest.mark.parametrize(
    ("channel_id", "member_id", "field"), [("x", 1, "channel_id"), (1, "1.5", "member_id")]
)
def test_member_path_ids_must_be_integers(shared, channel_id, member_id, field):
    response = call(
        shared, "default", "get_member_by_id", channel_id=channel_id, member_id=member_id
    )
    assert_error(response, 400, "invalid_request", field)


def test_create_or_update_line_member(mutable):
    channel_id = channel_of_type(mutable, "jp", "line")
    before = truth(mutable, "jp")
    created = call(
        mutable,
        "jp",
        "create_or_update_channel_member",
        channel_id=channel_id,
        json={"channel_member_id": "U" + "ab" * 16},
    )
    assert created.status_code == 201
    assert set(created.json()) == {"member_id"}
    member_id = created.json()["member_id"]
    again = call(
        mutable,
        "jp",
        "create_or_update_channel_member",
        channel_id=channel_id,
        json={"channel_member_id": "U" + "ab" * 16},
    )
    assert (again.status_code, again.json()) == (200, {"member_id": member_id})
    found = call(
        mutable,
        "jp",
        "get_member_by_channel_id_and_external_id",
        channel_id=channel_id,
        external_member_id="U" + "ab" * 16,
    ).json()
    assert (found["id"], found["type"], found["assign_type"]) == (member_id, "line", "unassigned")
    by_id = call(mutable, "jp", "get_member_by_id", channel_id=channel_id, member_id=member_id)
    assert set(by_id.json()) == MEMBER_BY_ID_FIELDS
    after = truth(mutable, "jp")
    assert after["members_total"] == before["members_total"] + 1
    assert after["members"] == before["members"]  # has written no message yet


def test_create_or_update_existing_member_returns_its_id(mutable):
    channel_id = channel_of_type(mutable, "default", "line")
    svc = service(mutable.app, "default")
    row = int(
        np.flatnonzero(svc.members.table["channel"] == svc.directory.channel_index(channel_id))[0]
    )
    external = svc.members.external_ids[row]
    response = call(
        mutable,
        "default",
        "create_or_update_channel_member",
        channel_id=channel_id,
        json={"channel_member_id": external},
    )
    assert (response.status_code, response.json()) == (
        200,
        {"member_id": svc.members.member_id(row)},
    )


@pytest.mark.parametrize("kind", ["fb", "ig", "whatsapp", "wccs"])
def test_create_or_update_member_is_line_only(mutable, kind):
    channel_id = channel_of_type(mutable, "default", kind)
    response = call(
        mutable,
        "default",
        "create_or_update_channel_member",
        channel_id=channel_id,
        json={"channel_member_id": "U123"},
    )
    assert_error(response, 400, "unsupported_channel_type", "channel_id")


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({}, 400),
        ({"channel_member_id": ""}, 400),
        ({"channel_member_id": "U" * 128}, 201),
        ({"channel_member_id": "U" * 129}, 400),
        ({"channel_member_id": 12}, 400),
        ({"channel_member_id": None}, 400),
        ({"channel_member_id": "U1", "name": "x"}, 400),
    ],
)
def test_create_or_update_member_body(mutable, body, status):
    channel_id = channel_of_type(mutable, "default", "line")
    response = call(
        mutable, "default", "create_or_update_channel_member", channel_id=channel_id, json=body
    )
    if status == 400:
        field = "name" if "name" in body else "channel_member_id"
        assert_error(response, 400, "invalid_request", field)
    else:
        assert response.status_code == status


def test_create_or_update_member_unknown_channel_404(mutable):
    response = call(
        mutable,
        "default",
        "create_or_update_channel_member",
        channel_id=1,
        json={"channel_member_id": "U1"},
    )
    assert_error(response, 404, "not_found")


# --- assignments (the documented transitions)


def a_user(client, region: str, **where) -> int:
    users = call(client, region, "list_users", params={"limit": 1000}).json()["users"]
    return next(u["id"] for u in users if all(u[k] == v for k, v in where.items()))


def a_team(client, region: str) -> int:
    return call(client, region, "list_teams").json()["teams"][1]["id"]


def get_assignment(client, channel_id: int, member_id: int) -> dict:
    response = call(
        client, "default", "get_member_assignment", channel_id=channel_id, member_id=member_id
    )
    assert response.status_code == 200
    return response.json()


def start_in(client, start: str) -> tuple[int, int]:
    """A member whose assignment is `start` (set through manual assignment)."""
    channel_id, member_id = member(client, "default")
    body = {"channel_id": channel_id, "member_id": member_id, "assign_type": start}
    if start != "unassigned":
        body["assignment_relationship"] = {
            "user_id": a_user(client, "default", status="active", type="human")
        }
    assert call(client, "default", "manual_assignment", json=body).status_code == 200
    assert get_assignment(client, channel_id, member_id)["assign_type"] == start
    return channel_id, member_id


def test_assignment_form(shared):
    channel_id, member_id = member(shared, "default", assign=0)
    body = get_assignment(shared, channel_id, member_id)
    assert set(body) == {"assign_type", "assignment_relationship"}
    assert set(body["assignment_relationship"]) == {"team_id", "user_id"}
    assert body["assign_type"] == "case-based"
    user_ids = truth_ids(shared, "default", "users")
    assert body["assignment_relationship"]["user_id"] in user_ids
    unassigned = get_assignment(shared, *member(shared, "default", assign=2))
    assert unassigned == {
        "assign_type": "unassigned",
        "assignment_relationship": {"team_id": None, "user_id": None},
    }


STARTS = ["unassigned", "case-based", "permanent"]


@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize(
    ("assign_type", "stored"),
    [
        (None, "case-based"),
        ("manual", "case-based"),
        ("case-based", "case-based"),
        ("permanent", "permanent"),
    ],
)
@pytest.mark.parametrize("relationship", ["user", "team", "both"])
def test_manual_assignment_assigns(mutable, start, assign_type, stored, relationship):
    channel_id, member_id = start_in(mutable, start)
    user_id, team_id = a_user(mutable, "default", status="active"), a_team(mutable, "default")
    wanted = {
        "team_id": team_id if relationship != "user" else None,
        "user_id": user_id if relationship != "team" else None,
    }
    body = {
        "channel_id": channel_id,
        "member_id": member_id,
        "org_id": org_id(mutable),
        "assignment_relationship": {k: v for k, v in wanted.items() if v is not None},
    }
    if assign_type is not None:
        body["assign_type"] = assign_type
    response = call(mutable, "default", "manual_assignment", json=body)
    expected = {"assign_type": stored, "assignment_relationship": wanted}
    assert (response.status_code, response.json()) == (200, expected)
    assert get_assignment(mutable, channel_id, member_id) == expected
    found = call(mutable, "default", "get_member_by_id", channel_id=channel_id, member_id=member_id)
    assert found.json()["assign_type"] == stored


def org_id(client) -> int:
    return call(
        client, "default", "get_user_by_id", user_id=truth_ids(client, "default", "users")[0]
    ).json()["org_id"]


UNASSIGNED = {
    "assign_type": "unassigned",
    "assignment_relationship": {"team_id": None, "user_id": None},
}


@pytest.mark.parametrize("start", STARTS)
def test_manual_assignment_unassigned_clears(mutable, start):
    channel_id, member_id = start_in(mutable, start)
    response = call(
        mutable,
        "default",
        "manual_assignment",
        json={
            "assign_type": "unassigned",
            "channel_id": channel_id,
            "member_id": member_id,
            "assignment_relationship": {"user_id": a_user(mutable, "default")},
        },
    )
    assert (response.status_code, response.json()) == (200, UNASSIGNED)
    assert get_assignment(mutable, channel_id, member_id) == UNASSIGNED


@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("relationship", ["null", "absent", "empty", "member_only"])
def test_individual_assignment_with_empty_relationship_unassigns(mutable, start, relationship):
    channel_id, member_id = start_in(mutable, start)
    body = {"channel_id": channel_id, "org_id": org_id(mutable)}
    if relationship == "member_only":
        body["assignment_relationship"] = {"member_id": member_id}
    else:
        body["member_id"] = member_id  # the relationship, if any, names no member
        if relationship != "absent":
            body["assignment_relationship"] = None if relationship == "null" else {}
    response = call(mutable, "default", "assign_member_to_an_individual_user", json=body)
    assert (response.status_code, response.json()) == (200, UNASSIGNED)
    assert get_assignment(mutable, channel_id, member_id) == UNASSIGNED


@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("with_team", [False, True])
def test_individual_assignment_assigns_the_user(mutable, start, with_team):
    channel_id, member_id = start_in(mutable, start)
    user_id = a_user(mutable, "default", status="active", role_type="agent")
    relationship = {"member_id": member_id, "user_id": user_id}
    if with_team:
        relationship["team_id"] = a_team(mutable, "default")
    response = call(
        mutable,
        "default",
        "assign_member_to_an_individual_user",
        json={"channel_id": channel_id, "assignment_relationship": relationship},
    )
    expected = {
        "assign_type": "case-based",
        "assignment_relationship": {"team_id": relationship.get("team_id"), "user_id": user_id},
    }
    assert (response.status_code, response.json()) == (200, expected)
    assert get_assignment(mutable, channel_id, member_id) == expected


def assignment_error_cases(client) -> dict:
    channel_id, member_id = member(client, "default")
    other_channel = next(
        c["id"]
        for c in call(client, "default", "list_channels").json()["channels"]
        if c["id"] != channel_id
    )
    user_id = a_user(client, "default", status="active")
    deactivated = a_user(client, "default", status="deactivated")
    base = {"channel_id": channel_id, "member_id": member_id}
    relation = {"member_id": member_id, "user_id": user_id}
    return {
        "manual_unknown_user": (
            "manual_assignment",
            {**base, "assignment_relationship": {"user_id": 1}},
            404,
            "not_found",
            "assignment_relationship.user_id",
        ),
        "manual_unknown_team": (
            "manual_assignment",
            {**base, "assignment_relationship": {"team_id": 1}},
            404,
            "not_found",
            "assignment_relationship.team_id",
        ),
        "manual_deactivated_user": (
            "manual_assignment",
            {**base, "assignment_relationship": {"user_id": deactivated}},
            400,
            "invalid_request",
            "assignment_relationship.user_id",
        ),
        "manual_no_assignee": (
            "manual_assignment",
            {**base, "assignment_relationship": {}},
            400,
            "invalid_request",
            "assignment_relationship",
        ),
        "manual_no_relationship": (
            "manual_assignment",
            base,
            400,
            "invalid_request",
            "assignment_relationship",
        ),
        "manual_bad_assign_type": (
            "manual_assignment",
            {**base, "assign_type": "automatic"},
            400,
            "invalid_request",
            "assign_type",
        ),
        "manual_missing_member": (
            "manual_assignment",
            {"channel_id": channel_id},
            400,
            "invalid_request",
            "member_id",
        ),
        "manual_member_elsewhere": (
            "manual_assignment",
            {**base, "channel_id": other_channel, "assign_type": "unassigned"},
            404,
            "not_found",
            "member_id",
        ),
        "manual_unknown_channel": (
            "manual_assignment",
            {**base, "channel_id": 1, "assign_type": "unassigned"},
            404,
            "not_found",
            "channel_id",
        ),
        "manual_wrong_org": (
            "manual_assignment",
            {**base, "org_id": 1, "assign_type": "unassigned"},
            404,
            "not_found",
            "org_id",
        ),
        "manual_unknown_field": (
            "manual_assignment",
            {**base, "assign_type": "unassigned", "team": 1},
            400,
            "invalid_request",
            "team",
        ),
        "individual_unknown_user": (
            "assign_member_to_an_individual_user",
            {"channel_id": channel_id, "assignment_relationship": {**relation, "user_id": 1}},
            404,
            "not_found",
            "assignment_relationship.user_id",
        ),
        "individual_unknown_team": (
            "assign_member_to_an_individual_user",
            {"channel_id": channel_id, "assignment_relationship": {**relation, "team_id": 1}},
            404,
            "not_found",
            "assignment_relationship.team_id",
        ),
        "individual_team_without_user": (
            "assign_member_to_an_individual_user",
            {
                "channel_id": channel_id,
                "assignment_relationship": {
                    "member_id": member_id,
                    "team_id": a_team(client, "default"),
                },
            },
            400,
            "invalid_request",
            "assignment_relationship.user_id",
        ),
        "individual_no_member": (
            "assign_member_to_an_individual_user",
            {"channel_id": channel_id, "assignment_relationship": {"user_id": user_id}},
            400,
            "invalid_request",
            "assignment_relationship.member_id",
        ),
        "individual_two_members": (
            "assign_member_to_an_individual_user",
            {
                "channel_id": channel_id,
                "member_id": member_id + 1,
                "assignment_relationship": relation,
            },
            400,
            "invalid_request",
            "member_id",
        ),
        "individual_member_elsewhere": (
            "assign_member_to_an_individual_user",
            {"channel_id": other_channel, "assignment_relationship": relation},
            404,
            "not_found",
            "assignment_relationship.member_id",
        ),
        "individual_missing_channel": (
            "assign_member_to_an_individual_user",
            {"assignment_relationship": relation},
            400,
            "invalid_request",
            "channel_id",
        ),
        "individual_wrong_org": (
            "assign_member_to_an_individual_user",
            {"channel_id": channel_id, "org_id": 1, "assignment_relationship": relation},
            404,
            "not_found",
            "org_id",
        ),
        "individual_user_not_int": (
            "assign_member_to_an_individual_user",
            {"channel_id": channel_id, "assignment_relationship": {**relation, "user_id": "me"}},
            400,
            "invalid_request",
            "assignment_relationship.user_id",
        ),
    }


ASSIGNMENT_ERRORS = [
    "manual_unknown_user",
    "manual_unknown_team",
    "manual_deactivated_user",
    "manual_no_assignee",
    "manual_no_relationship",
    "manual_bad_assign_type",
    "manual_missing_member",
    "manual_member_elsewhere",
    "manual_unknown_channel",
    "manual_wrong_org",
    "manual_unknown_field",
    "individual_unknown_user",
    "individual_unknown_team",
    "individual_team_without_user",
    "individual_no_member",
    "individual_two_members",
    "individual_member_elsewhere",
    "individual_missing_channel",
    "individual_wrong_org",
    "individual_user_not_int",
]


@pytest.mark.parametrize("case", ASSIGNMENT_ERRORS)
def test_assignment_errors_leave_the_assignment_alone(mutable, case):
    operation, body, status, code, field = assignment_error_cases(mutable)[case]
    before = get_assignment(mutable, *member(mutable, "default"))
    assert_error(call(mutable, "default", operation, json=body), status, code, field)
    assert get_assignment(mutable, *member(mutable, "default")) == before


def test_assignment_error_cases_are_all_tested(mutable):
    assert set(assignment_error_cases(mutable)) == set(ASSIGNMENT_ERRORS)


# --- close conversation


@pytest.mark.parametrize("state", PROCESSING_STATES)
def test_close_conversation_resolves_from_any_state(mutable, state):
    channel_id, member_id = member(mutable, "default", state=PROCESSING_STATES.index(state))
    user_id = a_user(mutable, "default", role_type="agent")
    response = call(
        mutable,
        "default",
        "close_conversation",
        channel_id=channel_id,
        member_id=member_id,
        json={"user_id": user_id},
    )
    assert (response.status_code, response.json()) == (
        200,
        {"member_id": member_id, "processing_state": "resolved"},
    )
    found = call(mutable, "default", "get_member_by_id", channel_id=channel_id, member_id=member_id)
    assert found.json()["processing_state"] == "resolved"
    assert found.json()["updated_at"] == ANCHOR.isoformat()


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({}, 400, "invalid_request", "user_id"),
        ({"user_id": None}, 400, "invalid_request", "user_id"),
        ({"user_id": "one"}, 400, "invalid_request", "user_id"),
        ({"user_id": 1}, 404, "not_found", "user_id"),
    ],
)
def test_close_conversation_body(mutable, body, status, code, field):
    channel_id, member_id = member(mutable, "default", state=PROCESSING_STATES.index("open"))
    response = call(
        mutable,
        "default",
        "close_conversation",
        channel_id=channel_id,
        member_id=member_id,
        json=body,
    )
    assert_error(response, status, code, field)
    found = call(mutable, "default", "get_member_by_id", channel_id=channel_id, member_id=member_id)
    assert found.json()["processing_state"] == "open"


def test_close_conversation_unknown_member_404(mutable):
    channel_id, _ = member(mutable, "default")
    response = call(
        mutable,
        "default",
        "close_conversation",
        channel_id=channel_id,
        member_id=1,
        json={"user_id": a_user(mutable, "default")},
    )
    assert_error(response, 404, "not_found")


# --- teams


@pytest.mark.parametrize("region", REGIONS)
def test_team_forms(shared, region):
    teams = call(shared, region, "list_teams", params={"limit": 1000}).json()["teams"]
    assert all(set(t) == TEAM_LIST_FIELDS for t in teams)
    for team in teams:
        by_id = call(shared, region, "get_team_by_id", team_id=team["id"]).json()
        assert set(by_id) == TEAM_FIELDS
        assert {k: by_id[k] for k in TEAM_LIST_FIELDS} == team
        assert call(shared, region, "get_team_by_team_id", team_id=team["id"]).json() == team
        external = call(
            shared,
            region,
            "get_team_by_external_team_id",
            external_team_id=team["external_team_id"],
        ).json()
        assert external == by_id
    assert "by-queue" in {t["routing_rule"] for t in teams}


@pytest.mark.parametrize(
    "operation", ["get_team_by_id", "get_team_by_team_id", "update_team", "add_users_to_team"]
)
def test_unknown_team_404(mutable, operation):
    body = {"user_ids": [a_user(mutable, "default")]} if operation == "add_users_to_team" else {}
    response = call(mutable, "default", operation, team_id=1, json=body)
    assert_error(response, 404, "not_found")


def test_unknown_external_team_404(shared):
    response = call(shared, "default", "get_team_by_external_team_id", external_team_id="T-x")
    assert_error(response, 404, "not_found")


def test_update_team(mutable):
    team_id = a_team(mutable, "default")
    changes = {
        "name": "Night shift",
        "description": "",
        "category": "support",
        "routing_rule": "round-robin",
        "external_team_id": "T-night",
    }
    response = call(mutable, "default", "update_team", team_id=team_id, json=changes)
    assert response.status_code == 200
    assert set(response.json()) == TEAM_FIELDS
    assert {k: response.json()[k] for k in changes} == changes
    assert call(mutable, "default", "get_team_by_id", team_id=team_id).json() == response.json()
    found = call(mutable, "default", "get_team_by_external_team_id", external_team_id="T-night")
    assert found.json()["id"] == team_id
    partial = call(mutable, "default", "update_team", team_id=team_id, json={"name": "Nights"})
    assert partial.json() == {**response.json(), "name": "Nights"}


def test_update_team_not_editable_403(mutable):
    teams = call(mutable, "default", "list_teams").json()["teams"]
    fixed = next(
        t
        for t in teams
        if not call(mutable, "default", "get_team_by_id", team_id=t["id"]).json()["editable"]
    )
    response = call(mutable, "default", "update_team", team_id=fixed["id"], json={"name": "x"})
    assert_error(response, 403, "team_not_editable")


def test_update_team_external_id_taken_409(mutable):
    teams = call(mutable, "default", "list_teams").json()["teams"]
    response = call(
        mutable,
        "default",
        "update_team",
        team_id=teams[1]["id"],
        json={"external_team_id": teams[2]["external_team_id"]},
    )
    assert_error(response, 409, "conflict", "external_team_id")


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"name": ""}, 400, "name"),
        ({"name": "n"}, 200, None),
        ({"name": "n" * 100}, 200, None),
        ({"name": "n" * 101}, 400, "name"),
        ({"name": None}, 400, "name"),
        ({"description": "d" * 500}, 200, None),
        ({"description": "d" * 501}, 400, "description"),
        ({"category": ""}, 400, "category"),
        ({"category": "c" * 51}, 400, "category"),
        ({"routing_rule": "by-queue"}, 200, None),
        ({"routing_rule": "random"}, 400, "routing_rule"),
        ({"external_team_id": ""}, 400, "external_team_id"),
        ({"members": []}, 400, "members"),
        ({}, 200, None),
    ],
)
def test_update_team_body(mutable, body, status, field):
    response = call(
        mutable, "default", "update_team", team_id=a_team(mutable, "default"), json=body
    )
    if status == 400:
        assert_error(response, 400, "invalid_request", field)
    else:
        assert response.status_code == 200


def test_add_users_to_team(mutable):
    team_id = a_team(mutable, "default")
    user_ids = truth_ids(mutable, "default", "users")[-3:]
    response = call(
        mutable,
        "default",
        "add_users_to_team",
        team_id=team_id,
        json={"user_ids": [*user_ids, user_ids[0]]},
    )
    assert response.status_code == 200
    records = response.json()
    assert [u["id"] for u in records] == user_ids
    assert all(set(u) == TEAM_USER_FIELDS for u in records)
    assert all(
        isinstance(u[k], bool)
        for u in records
        for k in ("enable_popup_notification", "enable_sound_notification")
    )
    members = mutable.get(f"/_sandbox/conversation/default/teams/{team_id}/users").json()
    assert set(user_ids) <= set(members["user_ids"])


@pytest.mark.parametrize(
    ("user_ids", "status", "code"),
    [
        ([], 400, "invalid_request"),
        (list(range(101)), 400, "invalid_request"),
        ([1], 404, "not_found"),
        (["x"], 400, "invalid_request"),
        (None, 400, "invalid_request"),
    ],
)
def test_add_users_to_team_body(mutable, user_ids, status, code):
    team_id = a_team(mutable, "default")
    before = mutable.get(f"/_sandbox/conversation/default/teams/{team_id}/users").json()
    response = call(
        mutable, "default", "add_users_to_team", team_id=team_id, json={"user_ids": user_ids}
    )
    field = "user_ids.0" if user_ids == ["x"] else "user_ids"
    assert_error(response, status, code, field)
    assert mutable.get(f"/_sandbox/conversation/default/teams/{team_id}/users").json() == before


def test_add_users_with_one_unknown_adds_none(mutable):
    team_id = a_team(mutable, "default")
    before = mutable.get(f"/_sandbox/conversation/default/teams/{team_id}/users").json()
    known = truth_ids(mutable, "default", "users")[-1]
    response = call(
        mutable, "default", "add_users_to_team", team_id=team_id, json={"user_ids": [known, 1]}
    )
    assert_error(response, 404, "not_found", "user_ids")
    assert mutable.get(f"/_sandbox/conversation/default/teams/{team_id}/users").json() == before


# --- users


@pytest.mark.parametrize("region", REGIONS)
def test_user_forms(shared, region):
    users = call(shared, region, "list_users", params={"limit": 1000}).json()["users"]
    assert all(set(u) == USER_REDUCED_FIELDS for u in users)
    assert {u["role_type"] for u in users} == {"owner", "admin", "agent"}
    assert {u["type"] for u in users} == {"human", "ai"}
    for user in users:
        full = call(shared, region, "get_user_by_id", user_id=user["id"]).json()
        assert set(full) == USER_FIELDS
        assert {k: full[k] for k in USER_REDUCED_FIELDS} == user
        assert call(shared, region, "get_user_by_user_id", user_id=user["id"]).json() == user
        if user["external_user_id"] is not None:
            assert (
                call(
                    shared,
                    region,
                    "get_user_by_external_user_id",
                    external_user_id=user["external_user_id"],
                ).json()
                == full
            )


@pytest.mark.parametrize("operation", ["get_user_by_id", "get_user_by_user_id", "update_user"])
def test_unknown_user_404(mutable, operation):
    assert_error(call(mutable, "default", operation, user_id=1, json={}), 404, "not_found")


def test_unknown_external_user_404(shared):
    response = call(shared, "default", "get_user_by_external_user_id", external_user_id="EMP-x")
    assert_error(response, 404, "not_found")


def test_update_user(mutable):
    user_id = a_user(mutable, "default", role_type="agent")
    changes = {
        "avatar": "https://cdn.example/a.png",
        "chat_name": "Kim",
        "name": "Kim Lee",
        "external_user_id": "E-42",
        "mobile": "+819012345678",
    }
    response = call(mutable, "default", "update_user", user_id=user_id, json=changes)
    assert response.status_code == 200
    assert set(response.json()) == USER_FIELDS
    assert {k: response.json()[k] for k in changes if k != "mobile"} == {
        k: v for k, v in changes.items() if k != "mobile"
    }
    assert call(mutable, "default", "get_user_by_id", user_id=user_id).json() == response.json()
    added = call(
        mutable,
        "default",
        "add_users_to_team",
        team_id=a_team(mutable, "default"),
        json={"user_ids": [user_id]},
    ).json()[0]
    assert added["mobile"] == "+819012345678"
    assert added["updated_at"] == ANCHOR.isoformat()
    found = call(mutable, "default", "get_user_by_external_user_id", external_user_id="E-42")
    assert found.json()["id"] == user_id
    cleared = call(
        mutable, "default", "update_user", user_id=user_id, json={"external_user_id": None}
    )
    assert cleared.json()["external_user_id"] is None
    gone = call(mutable, "default", "get_user_by_external_user_id", external_user_id="E-42")
    assert_error(gone, 404, "not_found")


def test_update_user_external_id_taken_409(mutable):
    users = call(mutable, "default", "list_users").json()["users"]
    taken = [u for u in users if u["external_user_id"]]
    response = call(
        mutable,
        "default",
        "update_user",
        user_id=taken[1]["id"],
        json={"external_user_id": taken[2]["external_user_id"]},
    )
    assert_error(response, 409, "conflict", "external_user_id")


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"name": ""}, 400, "name"),
        ({"name": "n" * 100}, 200, None),
        ({"name": "n" * 101}, 400, "name"),
        ({"name": None}, 400, "name"),
        ({"chat_name": ""}, 400, "chat_name"),
        ({"chat_name": "c" * 101}, 400, "chat_name"),
        ({"avatar": ""}, 400, "avatar"),
        ({"avatar": "a" * 2049}, 400, "avatar"),
        ({"avatar": None}, 400, "avatar"),
        ({"external_user_id": ""}, 400, "external_user_id"),
        ({"external_user_id": "e" * 128}, 200, None),
        ({"external_user_id": "e" * 129}, 400, "external_user_id"),
        ({"mobile": "+1234567"}, 200, None),
        ({"mobile": "+123456"}, 400, "mobile"),
        ({"mobile": "+123456789012345"}, 200, None),
        ({"mobile": "+1234567890123456"}, 400, "mobile"),
        ({"mobile": "0901234567"}, 400, "mobile"),
        ({"email": "a@b.c"}, 400, "email"),
        ({}, 200, None),
    ],
)
def test_update_user_body(mutable, body, status, field):
    response = call(
        mutable, "default", "update_user", user_id=a_user(mutable, "default"), json=body
    )
    if status == 400:
        assert_error(response, 400, "invalid_request", field)
    else:
        assert response.status_code == 200


# --- backups


def test_backup_lifecycle(mutable):
    response = call(mutable, "default", "trigger_messages_backup", json=YEAR_WINDOW)
    assert response.status_code == 202
    assert set(response.json()) == {"backup_id"}
    backup_id = response.json()["backup_id"]
    states, details = [], []
    deadline = time.monotonic() + 10
    while not states or states[-1] != "completed":
        detail = call(mutable, "default", "get_backup_detail", backup_id=backup_id).json()
        assert set(detail) == BACKUP_FIELDS
        if not states or states[-1] != detail["state"]:
            states.append(detail["state"])
            details.append(detail)
        if detail["state"] != "completed":
            early = mutable.get(f"/conversation/v1/backups/{backup_id}/download", headers=APIKEY)
            # The state may complete between the two calls; only a backup still unfinished
            # after the download proves the download came too early.
            after = call(mutable, "default", "get_backup_detail", backup_id=backup_id).json()
            if after["state"] != "completed":
                assert_error(early, 409, "backup_not_ready")
        assert time.monotonic() < deadline
        time.sleep(0.005)
    # In the lifecycle's order, from the first state to the last: a poll on a busy machine
    # may fall after a whole phase (`processing` lasts `task_phase_seconds`).
    assert states[0] == "initiated" and states[-1] == "completed"
    assert states == [state for state in BACKUP_STATES if state in states]
    urls = {d["state"]: d["download_url"] for d in details}
    assert urls == {
        state: f"{PUBLIC_URL}/conversation/v1/backups/{backup_id}/download"
        if state == "completed"
        else ""
        for state in states
    }
    assert {d["created_at"] for d in details} == {ANCHOR.isoformat()}


@pytest.mark.parametrize("region", REGIONS)
def test_year_backup_equals_the_truth(shared, region):
    rows = backup_rows(shared, region, YEAR_WINDOW)
    assert [r["message_uuid"] for r in rows] == truth_ids(shared, region, "messages")
    assert len(rows) == truth(shared, region)["messages"] == 5000
    members = sorted({int(r["member_id"]) for r in rows})
    assert members == sorted(truth_ids(shared, region, "members"))
    assert len(members) == truth(shared, region)["assignments"]
    assert truth(shared, region)["members_total"] > len(members)
    stamps = [r["timestamp"] for r in rows]
    assert stamps == sorted(stamps)
    assert YEAR_WINDOW["started_at"] <= stamps[0] and stamps[-1] < ANCHOR.isoformat()


@pytest.mark.parametrize("region", REGIONS)
def test_truth_per_day_counts_the_year_backup_by_day(shared, region):
    days = shared.get(f"/_sandbox/truth/conversation/{region}/messages/days").json()["days"]
    first = (ANCHOR - timedelta(days=365)).date()
    assert list(days) == [(first + timedelta(days=d)).isoformat() for d in range(366)]
    counted = Counter(row["timestamp"][:10] for row in backup_rows(shared, region, YEAR_WINDOW))
    assert {day: count for day, count in days.items() if count} == dict(counted)
    assert shared.get(f"/_sandbox/truth/conversation/{region}/users/days").status_code == 404


def test_backup_rows_are_well_formed(shared):
    rows = backup_rows(shared, "default", YEAR_WINDOW)
    channels = set(truth_ids(shared, "default", "channels"))
    users = set(truth_ids(shared, "default", "users"))
    assert {r["sender_type"] for r in rows} == {"member", "user", "bot"}
    assert {r["message_type"] for r in rows} == {"text", "image"}
    for row in rows:
        assert int(row["channel_id"]) in channels
        if row["sender_type"] == "member":
            assert row["sender_id"] == row["member_id"]
        else:
            assert int(row["sender_id"]) in users
        if row["message_type"] == "image":  # empty text, a url and a mime_type
            assert row["text"] == "" and row["url"].startswith("https://")
            assert row["mime_type"] in ("image/jpeg", "image/png")
        else:
            assert row["text"] and row["url"] == row["mime_type"] == ""
    assert any("\n" in r["text"] and "," in r["text"] for r in rows)  # quoting round-trips
    conversations = {}
    for row in rows:  # a conversation belongs to one member
        assert (
            conversations.setdefault(row["conversation_id"], row["member_id"]) == row["member_id"]
        )
    assert len(conversations) < len(rows)


def test_every_member_in_a_backup_resolves(shared):
    rows = backup_rows(shared, "jp", YEAR_WINDOW)
    pairs = {(r["channel_id"], r["member_id"]) for r in rows}
    for channel_id, member_id in pairs:
        response = call(
            shared, "jp", "get_member_by_id", channel_id=channel_id, member_id=member_id
        )
        assert response.status_code == 200
        assert response.json()["last_message_at"] is not None


def test_messages_follow_a_daily_and_weekly_rhythm(shared):
    rows = backup_rows(shared, "jp", YEAR_WINDOW)
    hours = np.array([int(r["timestamp"][11:13]) for r in rows])
    tokyo = (hours + 9) % 24
    assert np.mean((tokyo >= 19) & (tokyo <= 22)) > 2 * np.mean((tokyo >= 2) & (tokyo <= 5))
    days = np.array([np.datetime64(r["timestamp"][:10]).astype(int) for r in rows])
    weekday = (days + 3) % 7
    assert np.mean(weekday >= 5) > 2 / 7


def test_backup_window_is_half_open(shared):
    rows = backup_rows(shared, "default", YEAR_WINDOW)
    moment = rows[len(rows) // 2]["timestamp"]
    same = [r["message_uuid"] for r in rows if r["timestamp"] == moment]
    starting = backup_rows(
        shared, "default", {"started_at": moment, "ended_at": YEAR_WINDOW["ended_at"]}
    )
    ending = backup_rows(
        shared, "default", {"started_at": YEAR_WINDOW["started_at"], "ended_at": moment}
    )
    assert [r["message_uuid"] for r in starting][: len(same)] == same
    assert not {r["message_uuid"] for r in ending} & set(same)
    assert len(starting) + len(ending) == len(rows)


def test_backup_window_in_another_timezone(shared):
    rows = backup_rows(
        shared,
        "default",
        {"started_at": "2026-06-01T09:00:00+09:00", "ended_at": "2026-06-02T09:00:00+09:00"},
    )
    assert rows
    assert all("2026-06-01T00:00:00" <= r["timestamp"] < "2026-06-02T00:00:00" for r in rows)


@pytest.mark.parametrize("filter_by", ["channel", "member", "both"])
def test_backup_filters(shared, filter_by):
    rows = backup_rows(shared, "default", YEAR_WINDOW)
    chatty = Counter(r["member_id"] for r in rows).most_common(1)[0][0]
    channel = next(r["channel_id"] for r in rows if r["member_id"] == chatty)
    body = dict(YEAR_WINDOW)
    if filter_by != "member":
        body["channel_id"] = int(channel)
    if filter_by != "channel":
        body["member_id"] = int(chatty)
    filtered = backup_rows(shared, "default", body)
    expected = [
        r
        for r in rows
        if (filter_by == "member" or r["channel_id"] == channel)
        and (filter_by == "channel" or r["member_id"] == chatty)
    ]
    assert filtered == expected
    assert len(expected) > 1


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        (
            {"started_at": "2026-01-01T00:00:00", "ended_at": "2026-02-01T00:00:00Z"},
            400,
            "invalid_request",
            "started_at",
        ),
        (
            {"started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-02-01T00:00:00"},
            400,
            "invalid_request",
            "ended_at",
        ),
        (
            {"started_at": "2026-01-01", "ended_at": "2026-02-01T00:00:00Z"},
            400,
            "invalid_request",
            "started_at",
        ),
        (
            {"started_at": 1767225600, "ended_at": "2026-02-01T00:00:00Z"},
            400,
            "invalid_request",
            "started_at",
        ),
        (
            {"started_at": "1767225600", "ended_at": "2026-02-01T00:00:00Z"},
            400,
            "invalid_request",
            "started_at",
        ),
        (
            {"started_at": "yesterday", "ended_at": "2026-02-01T00:00:00Z"},
            400,
            "invalid_request",
            "started_at",
        ),
        (
            {"started_at": "2026-13-01T00:00:00Z", "ended_at": "2026-02-01T00:00:00Z"},
            400,
            "invalid_request",
            "started_at",
        ),
        ({"ended_at": "2026-02-01T00:00:00Z"}, 400, "invalid_request", "started_at"),
        ({"started_at": "2026-01-01T00:00:00Z"}, 400, "invalid_request", "ended_at"),
        (
            {"started_at": "2026-02-01T00:00:00Z", "ended_at": "2026-02-01T00:00:00Z"},
            400,
            "invalid_request",
            "ended_at",
        ),
        (
            {"started_at": "2026-02-01T00:00:00Z", "ended_at": "2026-02-01T08:59:59+09:00"},
            400,
            "invalid_request",
            "ended_at",
        ),
        ({**YEAR_WINDOW, "channel_id": 1}, 404, "not_found", "channel_id"),
        ({**YEAR_WINDOW, "member_id": 1}, 404, "not_found", "member_id"),
        ({**YEAR_WINDOW, "channel_id": "one"}, 400, "invalid_request", "channel_id"),
        ({**YEAR_WINDOW, "format": "json"}, 400, "invalid_request", "format"),
    ],
)
def test_trigger_backup_body(shared, body, status, code, field):
    response = call(shared, "default", "trigger_messages_backup", json=body)
    assert_error(response, status, code, field)


def test_trigger_backup_member_of_another_channel_404(shared):
    channel_id, member_id = member(shared, "default")
    other = next(c for c in truth_ids(shared, "default", "channels") if c != channel_id)
    response = call(
        shared,
        "default",
        "trigger_messages_backup",
        json={**YEAR_WINDOW, "channel_id": other, "member_id": member_id},
    )
    assert_error(response, 404, "not_found", "member_id")


def test_trigger_backup_malformed_json_400(shared):
    method, path = OPERATIONS["trigger_messages_backup"]
    response = shared.request(
        method,
        BASES["default"] + path,
        content=b"{nope",
        headers={**APIKEY, "Content-Type": "application/json"},
    )
    assert_error(response, 400, "invalid_request", "body")


@pytest.mark.parametrize("backup_id", ["999999999", "x"])
def test_unknown_backup(shared, backup_id):
    detail = call(shared, "default", "get_backup_detail", backup_id=backup_id)
    download = shared.get(f"/conversation/v1/backups/{backup_id}/download", headers=APIKEY)
    if backup_id == "x":
        assert_error(detail, 400, "invalid_request", "backup_id")
        assert_error(download, 400, "invalid_request", "backup_id")
    else:
        assert_error(detail, 404, "not_found")
        assert_error(download, 404, "not_found")


def test_backups_are_per_region(shared):
    backup_id = call(shared, "default", "trigger_messages_backup", json=YEAR_WINDOW).json()[
        "backup_id"
    ]
    assert_error(call(shared, "jp", "get_backup_detail", backup_id=backup_id), 404, "not_found")


# --- live traffic and robustness


def test_live_messages_arrive_as_the_clock_moves(make_sandbox):
    # 6 a minute: message k arrives 10 (k + 1) s after the anchor; wall time adds none for 10 s.
    app = make_sandbox(frozen=False, arrivals_per_minute=6.0)
    with TestClient(app, base_url="http://sandbox") as client:
        before = truth(client, "default")
        assert before["messages"] == 5000
        app.sandbox.clock.advance(600)
        later = {
            "started_at": ANCHOR.isoformat(),
            "ended_at": (ANCHOR + timedelta(seconds=600)).isoformat(),
        }
        rows = backup_rows(client, "default", later)
        after = truth(client, "default")
        assert [r["timestamp"] for r in rows] == [
            (ANCHOR + timedelta(seconds=10 * k)).isoformat() for k in range(1, 60)
        ]
        # The year now starts 600 s later too: the truth is what a year's backup holds now.
        now = datetime.fromisoformat(client.get("/_sandbox/clock").json()["now"])
        year = backup_rows(
            client,
            "default",
            {
                "started_at": (now - timedelta(days=365)).isoformat(),
                "ended_at": (now + timedelta(seconds=1)).isoformat(),
            },
        )
        assert [r["message_uuid"] for r in year] == truth_ids(client, "default", "messages")
        assert after["messages"] == len(year) > before["messages"]
        last = rows[-1]
        found = call(
            client,
            "default",
            "get_member_by_id",
            channel_id=last["channel_id"],
            member_id=last["member_id"],
        ).json()
        assert found["last_message_at"] >= last["timestamp"]
        assert set(truth_ids(client, "default", "messages")) >= {r["message_uuid"] for r in rows}


def test_live_messages_are_deterministic(make_sandbox):
    uuids = []
    for _ in range(2):
        app = make_sandbox(frozen=False, arrivals_per_minute=60.0)
        app.sandbox.clock.advance(3000)
        uuids.append(service(app, "default").truth_ids("default", "messages")[5000:7900])
    assert uuids[0] == uuids[1] and len(uuids[0]) == 2900


def test_frozen_sandbox_gets_no_live_messages(make_sandbox):
    app = make_sandbox()
    history = service(app, "default").truth_ids("default", "messages")
    app.sandbox.clock.advance(3600)
    later = service(app, "default").truth_ids("default", "messages")
    assert later == history[len(history) - len(later) :]  # only the year's start moved


@pytest.mark.parametrize(
    ("operation", "params"),
    [
        ("get_member_by_id", {"channel_id": 2**70, "member_id": 2**70}),
        ("get_member_by_id", {"channel_id": -1, "member_id": -(2**70)}),
        ("get_member_assignment", {"channel_id": 0, "member_id": 0}),
        ("get_team_by_id", {"team_id": 2**70}),
        ("get_user_by_user_id", {"user_id": -5}),
        ("get_backup_detail", {"backup_id": 2**70}),
        (
            "get_member_by_channel_id_and_external_id",
            {"channel_id": 1, "external_member_id": "%00%ff"},
        ),
        ("get_user_by_external_user_id", {"external_user_id": "\u3042" * 300}),
    ],
)
def test_odd_ids_are_404_not_500(shared, operation, params):
    assert_error(call(shared, "default", operation, **params), 404, "not_found")


@pytest.mark.parametrize(
    "body", [b"[]", b"null", b'"x"', b'{"user_id": 1e400}', '{"user_id": "\u00e9"}'.encode()]
)
def test_odd_bodies_are_400_not_500(shared, body):
    channel_id, member_id = member(shared, "default")
    method, path = OPERATIONS["close_conversation"]
    url = BASES["default"] + path.format(channel_id=channel_id, member_id=member_id)
    response = shared.request(
        method, url, content=body, headers={**APIKEY, "Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


def test_members_are_the_data_hubs_contacts_on_their_channels(shared):
    """A conversation member's external id is a data hub contact's id on a channel of the same
    type, in the same region: the member joins the hub's member (and the brand's customer)."""
    app = shared.app
    for region in ("default", "jp"):
        members = app.services[("conversation", region)].members
        hub = app.services[("datahub", region)].hub.contacts.channel_member_ids()
        channels = app.services[("conversation", region)].directory.channels
        kinds = [channels[c]["type"] for c in members.table["channel"].tolist()]
        linked = [
            e in set(hub.get(k, ())) for k, e in zip(kinds, members.external_ids, strict=True)
        ]
        assert sum(linked) > 0.9 * len(linked)
        assert len(set(zip(kinds, members.external_ids, strict=True))) == len(linked)
