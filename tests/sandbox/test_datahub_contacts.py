"""Conformance of the data hub's contacts side to its documented behaviour: profile updates,
member import and export tasks, custom fields, broadcasts and their reports, simulated
campaigns and the webhooks they send, live traffic, ground truth."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import hmac
import io
import json
import time
from datetime import date, timedelta
from types import SimpleNamespace

import httpx
import pytest
from starlette.testclient import TestClient

from sandbox.app import build_app
from sandbox.config import SandboxConfig
from sandbox.datahub.contact_data import EXPORT_FIELDS
from sandbox.datahub.contacts import OPERATIONS
from tests.conftest import ANCHOR, build_hooked
from tests.constants import APIKEY

DATAHUB = "/datahub"
PROFILE = f"{DATAHUB}/v1/contacts/profile"
IMPORT = f"{DATAHUB}/v1/members/import"
EXPORT = f"{DATAHUB}/v1/members/export"
BROADCASTS = f"{DATAHUB}/v1/broadcasts"
CUSTOM_FIELDS = f"{DATAHUB}/cdh/v1/custom-fields/"
SECRET = "test-signing-secret"


# -- helpers ----------------------------------------------------------------------------


def member_ids(http: TestClient, region: str = "default") -> list[int]:
    return http.get(f"/_sandbox/truth/datahub/{region}/members/ids").json()["ids"]


def contact(http: TestClient, member_id: int, region: str = "default") -> dict:
    answer = http.get(f"/_sandbox/datahub/{region}/contacts/{member_id}")
    assert answer.status_code == 200
    return answer.json()


def find_contacts(http: TestClient, count: int, region: str = "default", **wanted) -> list:
    """The first members whose profile matches `wanted` (value, or True for "not null")."""
    found = []
    for member_id in member_ids(http, region):
        candidate = contact(http, member_id, region)
        if all(
            candidate[k] is not None if v is True else candidate[k] == v for k, v in wanted.items()
        ):
            found.append(candidate)
            if len(found) == count:
                return found
    raise AssertionError(f"fewer than {count} contacts with {wanted}")


def find_contact(http: TestClient, region: str = "default", **wanted) -> dict:
    return find_contacts(http, 1, region, **wanted)[0]


def identity(found: dict) -> dict:
    return {
        "channel_type": found["channel_type"],
        "external_channel_id": found["external_channel_id"],
        "external_member_id": found["external_member_id"],
    }


def update(http: TestClient, found: dict, data: dict, headers: dict = APIKEY) -> httpx.Response:
    return http.patch(PROFILE, headers=headers, json=identity(found) | {"data": data})


def custom_field(http: TestClient, kind: str, active: bool = True) -> dict:
    fields = http.get(CUSTOM_FIELDS, headers=APIKEY).json()
    return next(f for f in fields if f["type"] == kind and f["active"] == active)


def wait_task(http: TestClient, task_id: int, prefix: str = DATAHUB) -> dict:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        task = http.get(f"{prefix}/task/{task_id}", headers=APIKEY).json()
        if task["status"] in ("success", "failed"):
            return task
        time.sleep(0.02)
    raise AssertionError(f"task {task_id} did not finish")


def export_rows(http: TestClient) -> list[dict]:
    task = wait_task(http, http.post(EXPORT, headers=APIKEY).json()["id"])
    url = httpx.URL(task["result"]["download_url"])
    answer = http.get(url.path, headers=APIKEY)
    assert answer.status_code == 200
    return list(csv.DictReader(io.StringIO(answer.text)))


def assert_error(answer: httpx.Response, status: int, code: str, field: str | None = None):
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    if field is not None:
        assert error["field"] == field


@pytest.fixture(scope="module")
def shared():
    """One sandbox for the rule tests: each asserts its own field, so they can share it."""
    config = SandboxConfig(frozen=True, now=ANCHOR, rate_limits=False)
    app = build_app(config)
    with TestClient(app, base_url="http://sandbox") as client:
        yield client
    app.sandbox.webhooks.close()


@pytest.fixture
def hooked():
    """A frozen sandbox whose webhooks land in a list (MockTransport)."""
    received: list[httpx.Request] = []
    app = build_hooked(received, SECRET)
    with TestClient(app, base_url="http://sandbox") as client:
        yield app, client, received
    app.sandbox.webhooks.close()


def envelopes(app, received: list[httpx.Request]) -> list[dict]:
    assert app.sandbox.webhooks.wait_idle(10)
    for request in received:
        expected = hmac.new(SECRET.encode(), request.content, hashlib.sha256).hexdigest()
        assert request.headers["Service-Signature"] == expected
    return [json.loads(request.content) for request in received]


# -- auth and surface -------------------------------------------------------------------


@pytest.mark.parametrize("headers", [{}, {"apikey": "wrong"}])
@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_every_operation_needs_the_apikey(shared, operation, headers):
    method, path = OPERATIONS[operation]
    path = path.format(task_id=1, broadcast_id=1)
    answer = shared.request(method, DATAHUB + path, headers=headers)
    assert_error(answer, 401, "unauthorized")


def test_openapi_lists_every_operation_at_its_path(http):
    document = http.get(f"{DATAHUB}/openapi.json").json()
    for operation, (method, path) in OPERATIONS.items():
        assert document["paths"][path][method.lower()]["operationId"] == operation


# -- profile update ---------------------------------------------------------------------


def test_profile_update_answers_only_changed_fields(http):
    found = find_contact(http, channel_type="line")
    data = {"city": "Kaohsiung", "member_level": "gold", "full_name": found["full_name"]}
    first = update(http, found, data)
    assert first.status_code == 200
    expected = {"city"} | ({"member_level"} if found["member_level"] != "gold" else set())
    assert set(first.json()["updated_fields"]) == expected
    assert update(http, found, data).json() == {"updated_fields": []}
    assert contact(http, found["member_id"])["city"] == "Kaohsiung"


def test_null_clears_a_predefined_field(http):
    found = find_contact(http, company=True)
    assert update(http, found, {"company": None}).json() == {"updated_fields": ["company"]}
    assert contact(http, found["member_id"])["company"] is None


@pytest.mark.parametrize("channel_type", ["line", "fb", "ig", "whatsapp", "wccs"])
def test_every_supported_channel_type_identifies_contacts(http, channel_type):
    found = find_contact(http, channel_type=channel_type)
    answer = update(http, found, {"region": "zz"})
    assert answer.json() == {"updated_fields": ["region"]}


@pytest.mark.parametrize("channel_type", ["email", "others"])
def test_unsupported_channel_types_are_refused(shared, channel_type):
    found = find_contact(shared, channel_type="line")
    body = identity(found) | {"channel_type": channel_type, "data": {"city": "x"}}
    answer = shared.patch(PROFILE, headers=APIKEY, json=body)
    assert_error(answer, 400, "invalid_request", "channel_type")
    assert "not supported" in answer.json()["error"]["message"]


def test_unknown_channel_type_is_refused(shared):
    found = find_contact(shared, channel_type="line")
    answer = shared.patch(
        PROFILE, headers=APIKEY, json=identity(found) | {"channel_type": "sms", "data": {}}
    )
    assert_error(answer, 400, "invalid_request", "channel_type")


@pytest.mark.parametrize(
    "change",
    [
        {"external_member_id": "U0000000000000000000000000000dead"},
        {"external_channel_id": "9999999999"},
    ],
)
def test_unknown_contact_is_404_member_not_found(shared, change):
    found = find_contact(shared, channel_type="line")
    answer = shared.patch(PROFILE, headers=APIKEY, json=identity(found) | change | {"data": {}})
    assert_error(answer, 404, "member_not_found")


@pytest.mark.parametrize(
    "missing", ["channel_type", "external_channel_id", "external_member_id", "data"]
)
def test_update_body_fields_are_required(shared, missing):
    found = find_contact(shared, channel_type="line")
    body = identity(found) | {"data": {}}
    del body[missing]
    assert_error(shared.patch(PROFILE, headers=APIKEY, json=body), 400, "invalid_request", missing)


@pytest.mark.parametrize(
    "key",
    [
        "nickname",
        "line_uid",
        "source",
        "member_id",
        "account_manager",
        "channel_type",
        "external_member_id",
    ],
)
def test_unknown_and_export_only_data_keys_are_refused(shared, key):
    found = find_contact(shared, channel_type="line")
    answer = update(shared, found, {key: "x"})
    assert_error(answer, 400, "invalid_request", f"data.{key}")


@pytest.mark.parametrize(
    ("field", "value", "accepted"),
    [
        ("display_mobile", "+886912345678", True),
        ("display_mobile", "+12345678", True),  # 8 digits
        ("display_mobile", "+123456789012345", True),  # 15 digits
        ("display_mobile", "+1234567", False),  # 7 digits
        ("display_mobile", "+1234567890123456", False),  # 16 digits
        ("display_mobile", "+0912345678", False),  # first digit 0
        ("display_mobile", "0912345678", False),  # no "+"
        ("display_mobile", "+886 912 345 678", False),
        ("gender", "female", True),
        ("gender", "other", True),
        ("gender", "f", False),
        ("birthday", "1990-02-28", True),
        ("birthday", "1992-02-29", True),
        ("birthday", "1990-02-29", False),  # no such day
        ("birthday", "19900228", False),
        ("birthday", "1990-2-28", False),
        ("full_name", 42, False),
    ],
)
def test_predefined_field_rules(shared, field, value, accepted):
    found = find_contact(shared, channel_type="line")
    answer = update(shared, found, {field: value})
    if accepted:
        assert answer.status_code == 200, answer.text
        assert contact(shared, found["member_id"])[field] == value
    else:
        assert_error(answer, 400, "invalid_request", f"data.{field}")


@pytest.mark.parametrize(
    ("kind", "value", "accepted"),
    [
        ("text", "a" * 255, True),
        ("text", "a" * 256, False),
        ("text", 5, False),
        ("number", 2147483647, True),
        ("number", 2147483648, False),
        ("number", -2147483647, True),
        ("number", -2147483648, False),
        ("number", 1.5, True),
        ("number", 123456789.123456, True),  # 15 significant digits
        ("number", 1234567.123456789, False),  # 16 significant digits
        ("number", True, False),  # JSON true is not a number
        ("number", "12", False),
        ("date", "2026-02-28", True),
        ("date", "2026-02-30", False),
        ("date", "2026/02/28", False),
        ("date", "2026-02-28T10:00:00+00:00", False),
        ("datetime", "2026-02-28T10:00:00+09:00", True),
        ("datetime", "2026-02-28T10:00:00Z", True),
        ("datetime", "2026-02-28T10:00:00.250-05:00", True),
        ("datetime", "2026-02-28T10:00:00", False),  # naive
        ("datetime", "2026-02-28", False),
        ("datetime", "2026-02-30T10:00:00Z", False),
        ("single_select", ["flagship"], False),  # an unhashable value is a 400, not a 500
        ("single_select", 1, False),
    ],
)
def test_custom_field_value_rules(shared, kind, value, accepted):
    definition = custom_field(shared, kind)
    key = f"cl_custom_{definition['key']}"
    found = find_contact(shared, channel_type="line")
    answer = update(shared, found, {"custom_fields": {key: value}})
    if accepted:
        assert answer.json() == {"updated_fields": [key]}
        assert contact(shared, found["member_id"])["custom_fields"][key] == value
    else:
        assert_error(answer, 400, "invalid_request", f"data.custom_fields.{key}")


def test_single_select_takes_the_option_key_not_its_name_and_null_clears(http):
    definition = custom_field(http, "single_select")
    key = f"cl_custom_{definition['key']}"
    active = [o for o in definition["options"] if o["active"]]
    found = find_contact(http, channel_type="line")
    by_name = update(http, found, {"custom_fields": {key: active[0]["name"]}})
    assert_error(by_name, 400, "invalid_request", f"data.custom_fields.{key}")
    by_key = update(http, found, {"custom_fields": {key: active[0]["key"]}})
    assert by_key.status_code == 200
    assert contact(http, found["member_id"])["custom_fields"][key] == active[0]["key"]
    cleared = update(http, found, {"custom_fields": {key: None}})
    assert cleared.json() == {"updated_fields": [key]}
    assert key not in contact(http, found["member_id"])["custom_fields"]


def test_archived_option_key_is_refused(shared):
    definition = next(
        f
        for f in shared.get(CUSTOM_FIELDS, headers=APIKEY).json()
        if f["options"] and any(not o["active"] for o in f["options"])
    )
    archived = next(o for o in definition["options"] if not o["active"])
    key = f"cl_custom_{definition['key']}"
    answer = update(
        shared, find_contact(shared, channel_type="line"), {"custom_fields": {key: archived["key"]}}
    )
    assert_error(answer, 400, "invalid_request", f"data.custom_fields.{key}")


@pytest.mark.parametrize("archived", [True, False])
def test_unknown_or_archived_custom_field_is_refused(shared, archived):
    if archived:
        key = f"cl_custom_{custom_field(shared, 'text', active=False)['key']}"
    else:
        key = "cl_custom_no_such_field"
    answer = update(
        shared, find_contact(shared, channel_type="line"), {"custom_fields": {key: "x"}}
    )
    assert_error(answer, 400, "invalid_request", f"data.custom_fields.{key}")


def test_custom_field_key_needs_the_prefix(shared):
    plain = custom_field(shared, "text")["key"]
    answer = update(
        shared, find_contact(shared, channel_type="line"), {"custom_fields": {plain: "x"}}
    )
    assert_error(answer, 400, "invalid_request", f"data.custom_fields.{plain}")


def test_profile_update_rate_limit_is_6000_per_minute_with_retry_after(sandbox_app, monkeypatch):
    # The limiter's clock stands still: 6,000 requests take more than a minute on a busy
    # machine, and the window would slide under them.
    monkeypatch.setattr("sandbox.ratelimit.time", SimpleNamespace(monotonic=lambda: 1_000.0))
    body = {
        "channel_type": "line",
        "external_channel_id": "x",
        "external_member_id": "y",
        "data": {},
    }

    async def fire() -> list[httpx.Response]:
        transport = httpx.ASGITransport(sandbox_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as client:
            return [await client.patch(PROFILE, headers=APIKEY, json=body) for _ in range(6001)]

    answers = asyncio.run(fire())
    assert {a.status_code for a in answers[:6000]} == {404}
    assert_error(answers[6000], 429, "rate_limited")
    assert int(answers[6000].headers["Retry-After"]) >= 1


# -- import -----------------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "status"), [(0, 400), (1, 200), (10_000, 200), (10_001, 400)])
def test_import_batch_size_is_1_to_10000(http, rows, status):
    data = [{"customer_id": f"N{i}"} for i in range(rows)]
    answer = http.post(IMPORT, headers=APIKEY, json={"import_key": "customer_id", "data": data})
    assert answer.status_code == status, answer.text[:200]
    if status == 400:
        assert answer.json()["error"]["field"] == "data"
    else:
        task = answer.json()
        assert (task["category"], task["status"], task["result"]) == (
            "import_member",
            "pending",
            {},
        )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"import_key": "member_id", "data": [{"customer_id": "a"}]}, "import_key"),
        ({"data": [{"customer_id": "a"}]}, "import_key"),
        ({"import_key": "customer_id"}, "data"),
        ({"import_key": "customer_id", "data": [{"full_name": "no key"}]}, "data.0.customer_id"),
        (
            {"import_key": "line_uid", "data": [{"line_uid": "U1"}, {"line_uid": None}]},
            "data.1.line_uid",
        ),
        (
            {"import_key": "customer_id", "data": [{"customer_id": "a", "colour": "red"}]},
            "data.0.colour",
        ),
        (
            {"import_key": "customer_id", "data": [{"customer_id": "a", "gender": "f"}]},
            "data.0.gender",
        ),
        (
            {"import_key": "display_mobile", "data": [{"display_mobile": "0912"}]},
            "data.0.display_mobile",
        ),
    ],
)
def test_import_body_rules(shared, body, field):
    assert_error(shared.post(IMPORT, headers=APIKEY, json=body), 400, "invalid_request", field)


def test_sixteenth_import_within_a_minute_is_429_with_retry_after(http):
    body = {"import_key": "customer_id", "data": [{"customer_id": "X1"}]}
    for _ in range(15):
        assert http.post(IMPORT, headers=APIKEY, json=body).status_code == 200
    answer = http.post(IMPORT, headers=APIKEY, json=body)
    assert_error(answer, 429, "rate_limited")
    assert int(answer.headers["Retry-After"]) >= 1


def test_import_life_cycle_applies_once_and_counts_exactly(make_sandbox):
    app = make_sandbox(task_phase_seconds=0.3)
    with TestClient(app, base_url="http://sandbox") as http:
        changed, same = find_contacts(http, 2, customer_id=True, company=True)
        before = http.get("/_sandbox/truth").json()["datahub"]["default"]["members"]
        rows = [
            {"customer_id": changed["customer_id"], "company": None, "city": "Tainan"},
            {"customer_id": "NEW-1", "full_name": "New Member", "gender": "female"},
            {"customer_id": same["customer_id"], "city": same["city"]},  # no change
        ]
        created = http.post(
            IMPORT, headers=APIKEY, json={"import_key": "customer_id", "data": rows}
        )
        task_id = created.json()["id"]
        seen = [http.get(f"{DATAHUB}/task/{task_id}", headers=APIKEY).json()["status"]]
        while seen[-1] not in ("success", "failed"):
            time.sleep(0.05)
            seen.append(http.get(f"{DATAHUB}/task/{task_id}", headers=APIKEY).json()["status"])
        assert seen[0] == "pending" and "processing" in seen and seen[-1] == "success"
        for _ in range(5):  # polling again never applies the import twice
            task = http.get(f"{DATAHUB}/task/{task_id}", headers=APIKEY).json()
        assert task["result"] == {"updated_contact_size": 2}
        assert task["updated_at"] >= task["created_at"]
        after = contact(http, changed["member_id"])
        assert (after["company"], after["city"]) == (None, "Tainan")  # null cleared
        truth = http.get("/_sandbox/truth").json()["datahub"]["default"]["members"]
        assert truth == before + 1
        imports = http.get("/_sandbox/datahub/default/imports").json()
        assert imports == [
            {
                "task_id": task_id,
                "import_key": "customer_id",
                "rows": len(rows),
                "status": "success",
                "updated_contact_size": 2,
            }
        ]


def test_rows_sharing_a_new_key_create_one_contact(http):
    before = len(member_ids(http))
    rows = [
        {"display_email": "twin@example.com", "full_name": "A"},
        {"display_email": "twin@example.com", "city": "Osaka"},
    ]
    task = http.post(IMPORT, headers=APIKEY, json={"import_key": "display_email", "data": rows})
    assert wait_task(http, task.json()["id"])["result"] == {"updated_contact_size": 1}
    ids = member_ids(http)
    assert len(ids) == before + 1
    created = contact(http, ids[-1])
    assert (created["full_name"], created["city"], created["display_email"]) == (
        "A",
        "Osaka",
        "twin@example.com",
    )


def test_fail_next_makes_the_import_fail_and_applies_nothing(http):
    found = find_contact(http, customer_id=True)
    assert http.post("/_sandbox/datahub/default/imports/fail-next").status_code == 200
    rows = [{"customer_id": found["customer_id"], "city": "Nagoya"}, {"customer_id": "NEW-2"}]
    body = {"import_key": "customer_id", "data": rows}
    failed = wait_task(http, http.post(IMPORT, headers=APIKEY, json=body).json()["id"])
    assert (failed["status"], failed["result"]) == ("failed", {})
    assert contact(http, found["member_id"])["city"] == found["city"]
    assert len(member_ids(http)) == 1500
    retried = wait_task(http, http.post(IMPORT, headers=APIKEY, json=body).json()["id"])
    assert retried["status"] == "success"  # only the next import fails
    assert contact(http, found["member_id"])["city"] == "Nagoya"


@pytest.mark.parametrize(("task_id", "status"), [(1, 404), ("abc", 400)])
def test_task_status_of_unknown_or_malformed_id(shared, task_id, status):
    answer = shared.get(f"{DATAHUB}/task/{task_id}", headers=APIKEY)
    assert_error(answer, status, "not_found" if status == 404 else "invalid_request")


# -- export -----------------------------------------------------------------------------


def test_export_life_cycle_and_file(make_sandbox):
    app = make_sandbox(task_phase_seconds=0.3)
    with TestClient(app, base_url="http://sandbox") as http:
        assert_error(
            http.post(EXPORT, headers=APIKEY, json={"fields": []}), 400, "invalid_request", "fields"
        )
        task = http.post(EXPORT, headers=APIKEY, json={}).json()
        assert (task["category"], task["status"]) == ("export_member", "pending")
        early = http.get(f"{EXPORT}/{task['id']}/file", headers=APIKEY)
        # Only a task still unfinished after the download proves the download came too early.
        after = http.get(f"{DATAHUB}/task/{task['id']}", headers=APIKEY).json()
        if after["status"] != "success":
            assert_error(early, 409, "export_not_ready")
        done = wait_task(http, task["id"])
        assert done["status"] == "success"
        assert done["result"]["download_url"] == (
            f"http://127.0.0.1:8000/datahub/v1/members/export/{task['id']}/file"
        )
        answer = http.get(f"{EXPORT}/{task['id']}/file", headers=APIKEY)
        assert answer.headers["content-type"].startswith("text/csv")
        reader = csv.reader(io.StringIO(answer.content.decode("utf-8")))
        header, *rows = list(reader)
        assert header == list(EXPORT_FIELDS)
        truth = app.truth()["datahub"]["default"]
        assert len(rows) == done["result"]["row_count"] == truth["members"]
        assert [int(r[header.index("member_id")]) for r in rows] == member_ids(http)


@pytest.mark.parametrize("kind", ["unknown", "import"])
def test_export_file_of_unknown_or_import_task_is_404(http, kind):
    task_id = 1
    if kind == "import":
        body = {"import_key": "customer_id", "data": [{"customer_id": "a"}]}
        task_id = http.post(IMPORT, headers=APIKEY, json=body).json()["id"]
    assert_error(http.get(f"{EXPORT}/{task_id}/file", headers=APIKEY), 404, "not_found")


def test_export_reflects_the_contacts_as_of_its_completion(http):
    found = find_contact(http, channel_type="line")
    before = export_rows(http)
    assert update(http, found, {"city": "Sapporo"}).status_code == 200
    after = export_rows(http)
    by_member = {int(r["member_id"]): r for r in after}
    assert by_member[found["member_id"]]["city"] == "Sapporo"
    old = next(r for r in before if int(r["member_id"]) == found["member_id"])
    assert old["city"] == found["city"]


# -- custom fields ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "wanted"),
    [({}, {True, False}), ({"active": "true"}, {True}), ({"active": "false"}, {False})],
)
def test_custom_field_list_filters_on_active(shared, query, wanted):
    fields = shared.get(CUSTOM_FIELDS, headers=APIKEY, params=query).json()
    assert {f["active"] for f in fields} == wanted
    everything = shared.get(CUSTOM_FIELDS, headers=APIKEY).json()
    assert fields == [f for f in everything if f["active"] in wanted]


def test_custom_field_definitions_cover_every_type_and_options_only_on_single_select(http):
    fields = http.get(CUSTOM_FIELDS, headers=APIKEY).json()
    assert len(fields) == http.get("/_sandbox/truth").json()["datahub"]["default"]["custom_fields"]
    assert {f["type"] for f in fields} == {"text", "number", "date", "datetime", "single_select"}
    for definition in fields:
        assert set(definition) == {
            "id",
            "name",
            "key",
            "type",
            "description",
            "slot_number",
            "active",
            "options",
        }
        if definition["type"] == "single_select":
            for option in definition["options"]:
                assert set(option) == {"id", "key", "name", "description", "position", "active"}
        else:
            assert definition["options"] is None


def test_custom_field_list_refuses_a_non_boolean_active(shared):
    answer = shared.get(CUSTOM_FIELDS, headers=APIKEY, params={"active": "maybe"})
    assert_error(answer, 400, "invalid_request", "active")


# -- broadcasts -------------------------------------------------------------------------


def report(http: TestClient, broadcast_id: int, start: date, end: date) -> httpx.Response:
    params = {"start_date": start.isoformat(), "end_date": end.isoformat()}
    return http.get(f"{BROADCASTS}/{broadcast_id}/report", headers=APIKEY, params=params)


def test_broadcast_list_matches_truth(http):
    broadcasts = http.get(BROADCASTS, headers=APIKEY).json()
    assert [b["id"] for b in broadcasts] == http.get(
        "/_sandbox/truth/datahub/default/broadcasts/ids"
    ).json()["ids"]
    assert len(broadcasts) == 40
    for item in broadcasts:
        assert set(item) == {"id", "source", "name", "sent_date", "status", "created_at"}
        assert item["source"] in ("maac", "caac")
        assert item["status"] == (
            "sent" if item["sent_date"] <= ANCHOR.isoformat() else "scheduled"
        )
        assert item["created_at"] <= ANCHOR.isoformat()


@pytest.mark.parametrize(("days", "status"), [(1, 200), (59, 200), (60, 200), (61, 400)])
def test_report_range_is_at_most_60_days_inclusive(shared, days, status):
    broadcast = shared.get(BROADCASTS, headers=APIKEY).json()[0]
    start = date.fromisoformat(broadcast["sent_date"][:10])
    answer = report(shared, broadcast["id"], start, start + timedelta(days=days - 1))
    assert answer.status_code == status
    if status == 400:
        assert answer.json()["error"]["field"] == "end_date"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start_date": "2026-03-02", "end_date": "2026-03-01"}, "end_date"),
        ({"start_date": "2026-02-30", "end_date": "2026-03-01"}, "start_date"),
        ({"start_date": "2026/03/01", "end_date": "2026-03-01"}, "start_date"),
        ({"end_date": "2026-03-01"}, "start_date"),
        ({"start_date": "2026-03-01"}, "end_date"),
    ],
)
def test_report_date_rules(shared, params, field):
    broadcast_id = shared.get(BROADCASTS, headers=APIKEY).json()[0]["id"]
    answer = shared.get(f"{BROADCASTS}/{broadcast_id}/report", headers=APIKEY, params=params)
    assert_error(answer, 400, "invalid_request", field)


def test_report_of_unknown_broadcast_is_404(shared):
    answer = report(shared, 1, date(2026, 3, 1), date(2026, 3, 2))
    assert_error(answer, 404, "not_found")


def test_report_figures_add_up_over_split_ranges(http):
    for broadcast in http.get(BROADCASTS, headers=APIKEY).json()[:8]:
        sent_on = date.fromisoformat(broadcast["sent_date"][:10])
        whole = report(
            http, broadcast["id"], sent_on - timedelta(days=5), sent_on + timedelta(days=40)
        ).json()
        assert set(whole) == {
            "name",
            "source",
            "sent_date",
            "segment_name",
            "sent",
            "open_count",
            "clicks",
        }
        assert (whole["name"], whole["source"]) == (broadcast["name"], broadcast["source"])
        for split in (0, 1, 3):
            left = report(
                http, broadcast["id"], sent_on - timedelta(days=5), sent_on + timedelta(days=split)
            ).json()
            right = report(
                http,
                broadcast["id"],
                sent_on + timedelta(days=split + 1),
                sent_on + timedelta(days=40),
            ).json()
            for figure in ("sent", "open_count", "clicks"):
                assert left[figure] + right[figure] == whole[figure]
        if broadcast["status"] == "sent":
            assert 0 < whole["clicks"] <= whole["open_count"] <= whole["sent"]
        else:
            assert whole["sent"] == whole["open_count"] == whole["clicks"] == 0


# -- campaigns and webhooks -------------------------------------------------------------


def test_campaign_sends_every_event_family_and_its_report_agrees(hooked):
    app, http, received = hooked
    answer = http.post("/_sandbox/datahub/default/campaigns", json={"source": "maac"})
    summary = answer.json()
    events = envelopes(app, received)
    kinds = {e["event"] for e in events}
    assert kinds == {
        "message.send",
        "message.open",
        "message.click",
        "prize.send",
        "prize.claim",
        "prize.redeem",
        "contact.tag.add",
        "contact.tag.remove",
        "sms_plus.status.update",
    }
    for envelope in events:
        assert set(envelope) == {"event", "timestamp", "source", "data"}
        assert envelope["timestamp"] <= ANCHOR.isoformat()
    assert {e["source"] for e in events if e["event"].startswith("sms_plus")} == {"maac"}
    counted = {k: sum(e["event"] == k for e in events) for k in kinds}
    assert counted == summary["events"]
    click = next(e["data"] for e in events if e["event"] == "message.click")
    assert set(click) == {
        "campaign_id",
        "campaign_type",
        "campaign_name",
        "customer_id",
        "line_uid",
        "url",
    }
    assert all("code" in e["data"] for e in events if e["event"] in ("prize.claim", "prize.redeem"))
    broadcasts = http.get(BROADCASTS, headers=APIKEY).json()
    assert broadcasts[-1]["id"] == summary["broadcast_id"]
    assert len(broadcasts) == app.truth()["datahub"]["default"]["broadcasts"] == 41
    day = ANCHOR.date()
    figures = report(http, summary["broadcast_id"], day - timedelta(days=1), day).json()
    assert (figures["sent"], figures["open_count"], figures["clicks"]) == (
        counted["message.send"],
        counted["message.open"],
        counted["message.click"],
    )


def test_caac_campaign_sends_no_sms_events(hooked):
    app, http, received = hooked
    http.post("/_sandbox/datahub/default/campaigns", json={"source": "caac", "kind": "journey"})
    events = envelopes(app, received)
    assert "sms_plus.status.update" not in {e["event"] for e in events}
    assert {e["source"] for e in events} == {"caac"}
    assert {e["data"]["campaign_type"] for e in events if e["event"] == "message.send"} == {
        "journey"
    }


def test_profile_update_sends_its_profile_events(hooked):
    app, http, received = hooked
    found = find_contact(http, channel_type="line", customer_id=True, connect_id=True)
    data = {
        "city": "Kyoto",
        "customer_id": "CUST-NEW",
        "connect_id": "cn_new",
        "custom_fields": {f"cl_custom_{custom_field(http, 'text')['key']}": "Kyo"},
    }
    assert update(http, found, data).status_code == 200
    events = {e["event"]: e for e in envelopes(app, received)}
    assert set(events) == {
        "contact.profile.city.update",
        "contact.profile.customer_id.update",
        "contact.profile.connect_id.update",
    }
    assert {e["source"] for e in events.values()} == {found["source"]}
    assert events["contact.profile.city.update"]["data"] == {
        "external_member_id": found["external_member_id"],
        "channel_type": "line",
        "customer_id": "CUST-NEW",
        "city": "Kyoto",
    }
    assert events["contact.profile.customer_id.update"]["data"] == {
        "customer_id": "CUST-NEW",
        "line_uid": found["line_uid"],
    }
    assert events["contact.profile.connect_id.update"]["data"] == {
        "external_member_id": found["external_member_id"],
        "channel_type": "line",
        "customer_id": "CUST-NEW",
        "connect_id": "cn_new",
    }


def test_import_sends_profile_events_for_changed_contacts_only(hooked):
    app, http, received = hooked
    found = find_contact(http, customer_id=True, gender="male")
    rows = [{"customer_id": found["customer_id"], "gender": "female"}, {"customer_id": "NEW"}]
    task = http.post(IMPORT, headers=APIKEY, json={"import_key": "customer_id", "data": rows})
    assert wait_task(http, task.json()["id"])["status"] == "success"
    events = envelopes(app, received)
    assert [(e["event"], e["data"]["gender"]) for e in events] == [
        ("contact.profile.gender.update", "female")
    ]


# -- regions, live traffic, truth -------------------------------------------------------


def test_regions_hold_different_data_and_change_independently(http):
    assert member_ids(http, "default") != member_ids(http, "jp")
    default_ids = [b["id"] for b in http.get(BROADCASTS, headers=APIKEY).json()]
    jp_ids = [b["id"] for b in http.get(f"{DATAHUB}-jp/v1/broadcasts", headers=APIKEY).json()]
    assert default_ids != jp_ids
    body = {"import_key": "customer_id", "data": [{"customer_id": "ONLY-DEFAULT"}]}
    wait_task(http, http.post(IMPORT, headers=APIKEY, json=body).json()["id"])
    truth = http.get("/_sandbox/truth").json()["datahub"]
    assert (truth["default"]["members"], truth["jp"]["members"]) == (1501, 1500)
    jp = find_contact(http, "jp", channel_type="line")
    assert jp["region"] in ("jp", "tw", "us")
    answer = http.patch(
        f"{DATAHUB}-jp/v1/contacts/profile",
        headers=APIKEY,
        json=identity(jp) | {"data": {"city": "Fukuoka"}},
    )
    assert answer.json() == {"updated_fields": ["city"]}
    assert http.get("/_sandbox/datahub/jp/profile-updates").json()["accepted"] == 1
    assert http.get("/_sandbox/datahub/default/profile-updates").json()["accepted"] == 0
    assert_error(
        http.patch(PROFILE, headers=APIKEY, json=identity(jp) | {"data": {}}),
        404,
        "member_not_found",
    )


def test_live_clock_brings_profile_changes_and_campaigns(make_sandbox):
    app = make_sandbox(frozen=False, arrivals_per_minute=30.0)
    with TestClient(app, base_url="http://sandbox") as http:
        # A busy machine may let a change or two arrive before the first look: count from it.
        before = http.get("/_sandbox/datahub/default/profile-updates").json()["live_changes"]
        assert before < 30
        app.sandbox.clock.advance(3600)
        counts = http.get("/_sandbox/datahub/default/profile-updates").json()
        assert counts["live_changes"] >= before + 1800
        assert counts["campaigns"] == 2  # one every 30 minutes of data time
        broadcasts = http.get(BROADCASTS, headers=APIKEY).json()
        assert len(broadcasts) == app.truth()["datahub"]["default"]["broadcasts"] == 42


def test_frozen_clock_runs_no_campaign_on_its_own(http, sandbox_app):
    sandbox_app.sandbox.clock.advance(7200)
    counts = http.get("/_sandbox/datahub/default/profile-updates").json()
    assert (counts["live_changes"], counts["campaigns"]) == (0, 0)


def test_truth_matches_what_the_api_serves(http):
    truth = http.get("/_sandbox/truth").json()["datahub"]["default"]
    fields = http.get(CUSTOM_FIELDS, headers=APIKEY).json()
    broadcasts = http.get(BROADCASTS, headers=APIKEY).json()
    assert truth == {
        "members": 1500,
        "custom_fields": len(fields),
        "broadcasts": len(broadcasts),
        "broadcast_reports": len(broadcasts),
    }
    ids = http.get("/_sandbox/truth/datahub/default/custom_fields/ids").json()["ids"]
    assert ids == [f["id"] for f in fields]
    assert len(set(member_ids(http))) == 1500
