"""Simulated campaigns: one broadcast to a few dozen LINE contacts, and the webhooks it causes.

Every event family of spec section 6 except `*.sync` comes out of one campaign: message send,
open and click, prize send, claim and redeem, tag add and remove, and (source `maac` only)
SMS+ status updates. The broadcast counts its own events, so its report agrees with them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

import numpy as np

from sandbox.clock import iso
from sandbox.datahub.broadcasts import Broadcast
from sandbox.datahub.contact_data import ContactTable

# A campaign's sends start this long before it is run, so every event lies in the past.
LEAD = timedelta(minutes=10)
TAGS = (
    (301, "VIP"),
    (302, "Newsletter"),
    (303, "Clicked promo"),
    (304, "Prize winner"),
    (305, "Lapsed"),
)
PAGES = ("new-arrivals", "sale", "members", "gift-guide", "stores")
PNP_SETTINGS = ((71, "Order notices"), (72, "Campaign fallback"))

Emit = Callable[[str, str, dict, datetime], None]


def run_campaign(
    rng: np.random.Generator,
    broadcast: Broadcast,
    campaign_type: str,
    table: ContactTable,
    emit: Emit,
) -> dict[str, int]:
    """Emit the campaign's events in time order; return how many of each were sent."""
    start = broadcast.sent_date
    line_rows = table.line_rows()
    picked = rng.choice(line_rows, min(len(line_rows), int(rng.integers(24, 49))), replace=False)
    recipients = [table.profile(int(row)) for row in picked]
    base = {
        "campaign_id": broadcast.id,
        "campaign_type": campaign_type,
        "campaign_name": broadcast.name,
    }
    events: list[tuple[datetime, str, dict]] = []

    def add(at: datetime, event: str, data: dict) -> None:
        events.append((at, event, data))

    for position, contact in enumerate(recipients):
        who = {"customer_id": contact["customer_id"], "line_uid": contact["line_uid"]}
        add(start, "message.send", base | who)
        # The first recipient always opens and clicks, so each campaign shows both.
        if position == 0 or rng.random() < 0.55:
            opened = start + timedelta(seconds=int(rng.integers(30, 420)))
            add(opened, "message.open", base | who)
            if position == 0 or rng.random() < 0.4:
                clicked = opened + timedelta(seconds=int(rng.integers(5, 120)))
                url = f"https://shop.example/{PAGES[rng.integers(len(PAGES))]}?utm_campaign={broadcast.id}"
                add(clicked, "message.click", base | who | {"url": url})
    _prizes(rng, recipients[:4], base, start, add)
    _tags(rng, recipients[4:10], base, start, add)
    if broadcast.source == "maac":  # SMS+ is a maac product (spec section 6)
        with_mobile = [c for c in recipients if c["display_mobile"]][:3]
        _sms(rng, with_mobile, start, add)
    counted = Counter()
    for at, event, data in sorted(events, key=lambda e: e[0]):
        column = (
            ("message.send", "message.open", "message.click").index(event)
            if event.startswith("message.")
            else None
        )
        if column is not None:
            broadcast.count(at, column)
        source = "maac" if event == "sms_plus.status.update" else broadcast.source
        emit(event, source, data, at)
        counted[event] += 1
    return dict(counted)


def _prizes(rng, winners: list[dict], base: dict, start: datetime, add) -> None:
    """All winners get a prize; three claim it, two of those redeem it."""
    for position, contact in enumerate(winners):
        who = base | {"customer_id": contact["customer_id"], "line_uid": contact["line_uid"]}
        sent = start + timedelta(seconds=int(rng.integers(60, 180)))
        add(sent, "prize.send", who)
        code = f"PRZ-{int(rng.integers(16**8)):08X}"
        if position < 3:
            add(
                sent + timedelta(seconds=int(rng.integers(20, 120))),
                "prize.claim",
                who | {"code": code},
            )
        if position < 2:
            add(
                sent + timedelta(seconds=int(rng.integers(150, 400))),
                "prize.redeem",
                who | {"code": code},
            )


def _tags(rng, contacts: list[dict], base: dict, start: datetime, add) -> None:
    """The campaign tags its audience; a few lose a tag they no longer qualify for."""
    for position, contact in enumerate(contacts):
        tag_id, tag_name = TAGS[int(rng.integers(len(TAGS)))]
        who = {
            "customer_id": contact["customer_id"],
            "line_uid": contact["line_uid"],
            "external_member_id": contact["external_member_id"],
            "channel_type": contact["channel_type"],
            "tag_id": tag_id,
            "tag_name": tag_name,
        }
        at = start + timedelta(seconds=int(rng.integers(1, 300)))
        if position % 3 == 2:
            add(at, "contact.tag.remove", who)
        else:
            add(at, "contact.tag.add", base | who)


def _sms(rng, contacts: list[dict], start: datetime, add) -> None:
    """SMS+: a LINE notification by phone number (PNP) first, SMS as its fallback.

    Status values are not shown in the spec; the sandbox uses delivered / failed / not_sent.
    """
    for position, contact in enumerate(contacts):
        at = start + timedelta(seconds=int(rng.integers(5, 60)))
        setting_id, setting_name = PNP_SETTINGS[position % len(PNP_SETTINGS)]
        pnp_ok = position % 3 == 0
        sms_ok = position % 3 == 1
        add(
            at,
            "sms_plus.status.update",
            {
                "event_id": int(rng.integers(10**8, 10**9)),
                "status": "delivered" if pnp_ok or sms_ok else "failed",
                "sms_status": "not_sent" if pnp_ok else ("delivered" if sms_ok else "failed"),
                "line_push_status": "not_sent",
                "sms_delivered_at": iso(at) if sms_ok else None,
                "line_push_delivered_at": None,
                "pnp_delivered_at": iso(at) if pnp_ok else None,
                "pnp_setting_name": setting_name,
                "pnp_message_id": int(rng.integers(10**8, 10**9)),
                "pnp_setting_id": setting_id,
                "phone_number": contact["display_mobile"],
                "line_push_template_id": None,
                "line_push_error_category": None,
                "pnp_status": "delivered" if pnp_ok else "failed",
                "sms_error_category": None if pnp_ok or sms_ok else "invalid_number",
            },
        )
