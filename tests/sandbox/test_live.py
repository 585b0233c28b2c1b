"""The sandbox as time passes: asynchronous tasks finish with time, not with polling, and hold
what stood at their finish; a live sandbox keeps every stream arriving as its clock is
advanced, as a soak run does (`POST /_sandbox/clock/advance`, an hour at a time)."""

from __future__ import annotations

import csv
import io
import json
import time
from datetime import datetime, timedelta

import httpx
import pytest
from starlette.testclient import TestClient

from sandbox.app import SandboxApp, build_app
from sandbox.config import SandboxConfig
from tests.conftest import ANCHOR
from tests.constants import APIKEY, COMMENT, READWRITE

DATAHUB = "/datahub"
IMPORT = f"{DATAHUB}/v1/members/import"
EXPORT = f"{DATAHUB}/v1/members/export"
HOUR = 3600


def advance(http: TestClient, seconds: float) -> None:
    assert http.post("/_sandbox/clock/advance", params={"seconds": seconds}).status_code == 200


def hub_truth(http: TestClient, region: str = "default") -> dict:
    return http.get("/_sandbox/truth").json()["datahub"][region]


def contact(http: TestClient, member_id: int) -> dict:
    return http.get(f"/_sandbox/datahub/default/contacts/{member_id}").json()


def export_file(http: TestClient, task_id: int) -> list[dict]:
    answer = http.get(f"{EXPORT}/{task_id}/file", headers=APIKEY)
    assert answer.status_code == 200, answer.text
    return list(csv.DictReader(io.StringIO(answer.text)))


def first_member(http: TestClient) -> dict:
    """The first contact with a customer id (imports match on it)."""
    ids = http.get("/_sandbox/truth/datahub/default/members/ids").json()["ids"]
    return next(found for found in (contact(http, i) for i in ids) if found["customer_id"])


# -- tasks finish with time ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase_seconds", "wait", "clock_seconds"),
    [(0.5, 1.2, 0), (HOUR, 0, 2 * HOUR)],
    ids=["wall-clock", "clock-advanced"],
)
def test_an_import_nobody_polls_is_applied_once_its_time_passes(
    make_sandbox, phase_seconds, wait, clock_seconds
):
    """An import used to be applied at the first status read that found it done: unpolled,
    it never landed, and a clock jump did not finish it."""
    app = make_sandbox(task_phase_seconds=phase_seconds)
    with TestClient(app, base_url="http://sandbox") as http:
        found = first_member(http)
        members = hub_truth(http)["members"]
        rows = [
            {"customer_id": found["customer_id"], "city": "Kaohsiung"},
            {"customer_id": "UNPOLLED-1", "full_name": "Nobody Polled"},
        ]
        body = {"import_key": "customer_id", "data": rows}
        task = http.post(IMPORT, headers=APIKEY, json=body).json()
        assert hub_truth(http)["members"] == members  # not before its time
        time.sleep(wait)
        if clock_seconds:
            advance(http, clock_seconds)
        assert hub_truth(http)["members"] == members + 1
        assert contact(http, found["member_id"])["city"] == "Kaohsiung"
        done = http.get(f"{DATAHUB}/task/{task['id']}", headers=APIKEY).json()
        assert (done["status"], done["result"]) == ("success", {"updated_contact_size": 2})
        if clock_seconds:  # finished when its phases ended, not when it was read
            finished = datetime.fromisoformat(task["created_at"]) + timedelta(hours=2)
            assert done["updated_at"] == finished.isoformat()


def test_an_export_holds_the_contacts_at_its_finish_not_at_its_first_read(make_sandbox):
    app = make_sandbox()
    with TestClient(app, base_url="http://sandbox") as http:
        found = first_member(http)
        task = http.post(EXPORT, headers=APIKEY, json={}).json()
        time.sleep(0.3)  # two phases of 0.05 s: finished, never read
        keys = ("channel_type", "external_channel_id", "external_member_id")
        body = {key: found[key] for key in keys} | {"data": {"city": "Sapporo"}}
        update = http.patch(f"{DATAHUB}/v1/contacts/profile", headers=APIKEY, json=body)
        assert update.json() == {"updated_fields": ["city"]}
        rows = export_file(http, task["id"])
        exported = next(r for r in rows if int(r["member_id"]) == found["member_id"])
        assert exported["city"] == found["city"] != "Sapporo"


def live_app(**overrides) -> SandboxApp:
    """Live, one arrival a minute, no campaigns: contacts change only at whole minutes."""
    settings = {
        "frozen": False,
        "now": ANCHOR,
        "arrivals_per_minute": 1.0,
        "campaign_minutes": 0,
        "rate_limits": False,
    }
    return build_app(SandboxConfig(**settings | overrides))


def test_an_export_on_a_live_clock_holds_the_live_changes_up_to_its_finish_only():
    """Live changes are a function of the clock: the file must hold those up to the export's
    finish (data time) and none of those the clock brought after it."""
    # Minute arrivals; the export starts 30 s past the anchor and finishes 120 s later.
    late = live_app(task_phase_seconds=60)
    at_finish, afterwards = live_app(task_phase_seconds=0), live_app(task_phase_seconds=0)
    with (
        TestClient(late, base_url="http://sandbox") as http,
        TestClient(at_finish, base_url="http://sandbox") as twin,
        TestClient(afterwards, base_url="http://sandbox") as later,
    ):
        advance(http, 30)
        task = http.post(EXPORT, headers=APIKEY, json={}).json()
        advance(http, HOUR)
        changes = http.get("/_sandbox/datahub/default/profile-updates").json()["live_changes"]
        assert changes >= 60
        advance(twin, 150)  # the finish moment, on a sandbox whose export is instant
        advance(later, 150 + HOUR)
        expected = export_file(twin, twin.post(EXPORT, headers=APIKEY, json={}).json()["id"])
        current = export_file(later, later.post(EXPORT, headers=APIKEY, json={}).json()["id"])
        assert export_file(http, task["id"]) == expected != current
    for app in (late, at_finish, afterwards):
        app.sandbox.webhooks.close()


def test_a_backup_nobody_polls_holds_the_messages_up_to_its_finish():
    app = live_app(arrivals_per_minute=6.0, task_phase_seconds=60)  # a message every 10 s
    with TestClient(app, base_url="http://sandbox") as http:
        advance(http, 5)
        window = {
            "started_at": ANCHOR.isoformat(),
            "ended_at": (ANCHOR + timedelta(days=1)).isoformat(),
        }
        created = http.post("/conversation/v1/backups/messages", headers=APIKEY, json=window)
        backup_id = created.json()["backup_id"]
        advance(http, HOUR)
        download = http.get(f"/conversation/v1/backups/{backup_id}/download", headers=APIKEY)
        assert download.status_code == 200
        stamps = [row["timestamp"] for row in csv.DictReader(io.StringIO(download.text))]
        # Finished 125 s past the anchor: the twelve messages that had arrived by then.
        assert stamps == [(ANCHOR + timedelta(seconds=10 * k)).isoformat() for k in range(1, 13)]
        assert http.get("/_sandbox/truth").json()["conversation"]["default"]["messages"] > 5_300
    app.sandbox.webhooks.close()


# -- live arrivals ------------------------------------------------------------------------


def test_every_stream_keeps_arriving_day_after_day_as_the_clock_is_advanced():
    """A week advanced an hour at a time: every closed day has new trigger logs and
    messages in the truth per day, new broadcasts and signed webhook events of that day."""
    events: list[dict] = []

    def receive(request: httpx.Request) -> httpx.Response:
        events.append(json.loads(request.content))
        return httpx.Response(200)

    config = SandboxConfig(
        frozen=False,
        now=ANCHOR,
        arrivals_per_minute=0.2,
        campaign_minutes=12 * 60,
        rate_limits=False,
        webhook_url="http://hooks.test/in",
        webhook_secret="secret",
    )
    app = build_app(config, webhook_transport=httpx.MockTransport(receive))
    days = 7
    with TestClient(app, base_url="http://sandbox") as http:
        scope = http.get(f"{COMMENT}/me", headers=READWRITE).json()["workspace"]["id"]
        before = http.get("/_sandbox/truth").json()
        for _ in range(days * 24):
            advance(http, HOUR)
        after = http.get("/_sandbox/truth").json()
        logs = http.get(f"/_sandbox/truth/comment/{scope}/trigger_logs/days").json()["days"]
        messages = http.get("/_sandbox/truth/conversation/jp/messages/days").json()["days"]
        broadcasts = http.get(f"{DATAHUB}/v1/broadcasts", headers=APIKEY).json()
    assert app.sandbox.webhooks.wait_idle(30)
    app.sandbox.webhooks.close()
    closed = [(ANCHOR + timedelta(days=d)).date().isoformat() for d in range(1, days)]
    assert all(logs[day] > 0 and messages[day] > 0 for day in closed)
    assert after["comment"][scope]["trigger_logs"] > before["comment"][scope]["trigger_logs"]
    for region in ("default", "jp"):
        assert after["datahub"][region]["broadcasts"] == (
            before["datahub"][region]["broadcasts"] + 2 * days
        )
    sent_days = {b["sent_date"][:10] for b in broadcasts}
    event_days = {e["timestamp"][:10] for e in events}
    assert set(closed) <= sent_days & event_days
    kinds = {e["event"] for e in events}  # campaigns' events and live profile changes'
    assert "message.open" in kinds and any(k.startswith("contact.profile.") for k in kinds)
    # Modest rates: a week adds about 2,000 logs per workspace, not hundreds of thousands.
    added = after["comment"][scope]["trigger_logs"] - before["comment"][scope]["trigger_logs"]
    assert added <= days * 24 * 60 * 0.2 + 1


def test_a_frozen_sandbox_advanced_through_the_route_gets_nothing_new(make_sandbox):
    app = make_sandbox()
    with TestClient(app, base_url="http://sandbox") as http:
        scope = http.get(f"{COMMENT}/me", headers=READWRITE).json()["workspace"]["id"]
        before = http.get("/_sandbox/truth").json()["datahub"]
        advance(http, 3 * 24 * HOUR)
        assert http.get("/_sandbox/truth").json()["datahub"] == before
        logs = http.get(f"/_sandbox/truth/comment/{scope}/trigger_logs/days").json()["days"]
        messages = http.get("/_sandbox/truth/conversation/default/messages/days").json()["days"]
        later = [(ANCHOR + timedelta(days=d)).date().isoformat() for d in range(1, 4)]
        assert [logs[day] for day in later] == [messages[day] for day in later] == [0, 0, 0]
        counts = http.get("/_sandbox/datahub/default/profile-updates").json()
        assert (counts["live_changes"], counts["campaigns"]) == (0, 0)
