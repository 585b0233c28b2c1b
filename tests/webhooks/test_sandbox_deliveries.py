"""The sandbox's own webhook deliveries, duplicated and reordered by its faults, against its
delivery records: the warehouse holds each delivered event exactly once, with the envelope
the hub sent, and the typed views read every family."""

import json
import sqlite3
from collections import Counter
from contextlib import closing

import dagster as dg
import duckdb
import httpx
import pytest

from assets import webhooks
from assets.resources import LakeResource
from sandbox.config import SandboxConfig
from sandbox.faults import FaultSpec
from tests.webhooks.conftest import SECRET

APIKEY = {"apikey": "demo-apikey"}
COUPON = {
    "timestamp": "2026-10-01T09:30:00+00:00",
    "source_platform_name": "shopify",
    "source_store_type": "online_store",
    "source_store_id": "store-1",
    "source_platform_customer_id": "cust-1",
    "id": "cp-webhooks",
    "name": "Spring 10% off",
    "url": "https://shop.example/coupons/spring",
    "code": "SPRING10",
    "is_redeemable": True,
    "status": "active",
    "discount_type": "percentage",
    "discount_value": 10,
}
VIEWS = {
    "message_events": ("message.",),
    "prize_events": ("prize.",),
    "profile_changes": ("contact.profile.",),
    "tag_events": ("contact.tag.",),
    "sms_status": ("sms_plus.",),
    "sync_events": (".sync",),
}


def family(event: str) -> str:
    return next(v for v, marks in VIEWS.items() if any(m in event for m in marks))


def cause_events(base: str) -> str:
    """Two campaigns (maac and caac), a profile change and a coupon submission: every
    webhook event family the hub documents. Returns the coupon's event_id."""
    for body in ({"source": "maac"}, {"source": "caac", "kind": "journey"}):
        answer = httpx.post(f"{base}/_sandbox/datahub/default/campaigns", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
    member_id = httpx.get(f"{base}/_sandbox/truth/datahub/default/members/ids").json()["ids"][0]
    contact = httpx.get(f"{base}/_sandbox/datahub/default/contacts/{member_id}").json()
    identity = {k: contact[k] for k in ("channel_type", "external_channel_id")}
    identity["external_member_id"] = contact["external_member_id"]
    changed = httpx.patch(
        f"{base}/datahub/v1/contacts/profile",
        headers=APIKEY,
        json=identity | {"data": {"city": "Webhookville"}},
    )
    assert changed.status_code == 200, changed.text
    coupon = httpx.post(f"{base}/datahub/v1/records/coupon", headers=APIKEY, json=COUPON)
    assert coupon.status_code == 200, coupon.text
    return coupon.json()["event_id"]


@pytest.mark.parametrize("concurrency", [1, SandboxConfig.webhook_concurrency])
def test_duplicated_and_reordered_deliveries_land_exactly_once(
    start_sandbox, receiver, tmp_path, monkeypatch, concurrency
):
    """One delivery at a time keeps the order, so an arrival order other than the events'
    is the reorder fault's doing; the sandbox's default has several in flight."""
    faults = FaultSpec(webhook_dup=0.3, webhook_reorder=0.3)
    sandbox = start_sandbox(
        webhook_url=receiver.url,
        webhook_secret=SECRET,
        faults=faults,
        webhook_concurrency=concurrency,
    )
    coupon_event_id = cause_events(sandbox.url)
    answer = httpx.get(f"{sandbox.url}/_sandbox/webhooks", params={"wait": 30}, timeout=60)
    records = answer.json()
    assert records["idle"], "the sandbox did not finish delivering"
    deliveries = {d["idempotency_key"]: d for d in records["deliveries"]}
    assert all(d["delivered"] for d in deliveries.values())
    # The faults did fire: some events arrived twice, some after the one emitted next.
    assert any(len(d["attempts"]) > 1 for d in deliveries.values())
    with closing(sqlite3.connect(receiver.inbox.path)) as inbox:  # arrival order
        arrived = [k for (k,) in inbox.execute("SELECT idempotency_key FROM events ORDER BY id")]
    assert arrived != list(deliveries) and sorted(arrived) == sorted(deliveries)

    monkeypatch.setenv("WEBHOOK_INBOX", str(receiver.inbox.path))
    warehouse = tmp_path / "warehouse.duckdb"
    resource = LakeResource(lake_root=str(tmp_path / "lake"), warehouse_path=str(warehouse))
    with dg.DagsterInstance.ephemeral() as instance:
        assert dg.materialize(webhooks.ASSETS, resources={"lake": resource}, instance=instance)

    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute(
            "SELECT idempotency_key, event, strftime(timestamp, '%Y-%m-%dT%H:%M:%S+00:00'), "
            "source, event_id, data::VARCHAR, date FROM datahub.webhook_events"
        ).fetchall()
        counts = {
            view: con.execute(f"SELECT count(*) FROM datahub.{view}").fetchall()[0][0]
            for view in VIEWS
        }
        clicks = con.execute(
            "SELECT count(*), count(url) FROM datahub.message_events WHERE action = 'click'"
        ).fetchall()
        city = con.execute(
            "SELECT value FROM datahub.profile_changes WHERE field = 'city'"
        ).fetchall()
        coupon = con.execute(
            "SELECT event_id, id, is_redeemable, discount_value FROM datahub.sync_events"
        ).fetchall()
        sms = con.execute(
            "SELECT count(*) FROM datahub.sms_status WHERE event_id IS NULL OR status IS NULL"
        ).fetchall()

    assert len(rows) == len({row[0] for row in rows}), "an event landed twice"
    assert {row[0] for row in rows} == set(deliveries)
    for key, event, timestamp, source, event_id, data, day in rows:
        sent = deliveries[key]["envelope"]
        assert (event, timestamp, source) == (sent["event"], sent["timestamp"], sent["source"])
        assert event_id == sent.get("event_id")
        assert json.loads(data) == sent["data"]
        assert day.isoformat() == sent["timestamp"][:10]
    sent_per_family = Counter(family(d["event"]) for d in deliveries.values())
    assert counts == {view: sent_per_family[view] for view in VIEWS}
    assert all(counts.values()), counts
    assert clicks[0][0] > 0 and clicks[0][0] == clicks[0][1]
    assert ("Webhookville",) in city
    assert coupon == [(coupon_event_id, "cp-webhooks", True, pytest.approx(10.0))]
    assert sms == [(0,)]
