"""Broadcasts of one region and their per-day figures (spec sections 2 and 4).

A report sums per-day figures over its date range, so two adjacent ranges always add up to
their union. `sent` falls on the sent date; opens, then clicks, on the days after, decaying.
Figures count only once they happened (data time), so a scheduled broadcast reports zeros.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import numpy as np

from sandbox.clock import iso
from sandbox.context import Sandbox

OPEN_DAYS = 14  # opens of a broadcast spread over this many days from its sent date
SCHEDULED_SHARE = 0.04  # broadcasts still to be sent, within the next two weeks
NAMES = (
    "Weekend flash sale",
    "New arrivals",
    "Members-only preview",
    "Birthday month treat",
    "Free shipping this week",
    "Store opening invitation",
    "Restock alert",
    "Loyalty points reminder",
    "Holiday gift guide",
    "Survey: tell us what you think",
)
SEGMENTS = (
    "All friends",
    "VIP members",
    "Inactive 30 days",
    "New members",
    "Gold and platinum",
    "Cart abandoners",
)
# Evenings and lunchtime carry most sends; weekends more than weekdays.
HOUR_SHARES = np.array([0.2] * 7 + [1, 2, 2, 2, 2, 4, 3, 2, 2, 2, 3, 4, 6, 7, 6, 3, 1], float)
WEEKDAY_SHARES = np.array([0.9, 0.9, 0.9, 1.0, 1.3, 1.6, 1.5])


@dataclass
class Broadcast:
    id: int
    source: str
    name: str
    segment_name: str
    sent_date: datetime
    created_at: datetime
    # date ordinal -> [sent, opens, clicks] on that day
    days: dict[int, list[int]] = field(default_factory=dict)

    def status(self, now: datetime) -> str:
        return "sent" if self.sent_date <= now else "scheduled"

    def item(self, now: datetime) -> dict:
        return {
            "id": self.id,
            "source": self.source,
            "name": self.name,
            "sent_date": iso(self.sent_date),
            "status": self.status(now),
            "created_at": iso(self.created_at),
        }

    def report(self, start: date, end: date, now: datetime) -> dict:
        sent = opens = clicks = 0
        if self.sent_date <= now:
            last = min(end, now.date()).toordinal()
            for day in range(start.toordinal(), last + 1):
                figures = self.days.get(day)
                if figures:
                    sent, opens, clicks = sent + figures[0], opens + figures[1], clicks + figures[2]
        return {
            "name": self.name,
            "source": self.source,
            "sent_date": iso(self.sent_date),
            "segment_name": self.segment_name,
            "sent": sent,
            "open_count": opens,
            "clicks": clicks,
        }

    def count(self, moment: datetime, column: int) -> None:
        """One event of a simulated campaign: 0 send, 1 open, 2 click."""
        self.days.setdefault(moment.date().toordinal(), [0, 0, 0])[column] += 1


def generate(sandbox: Sandbox, region: str, audience: int) -> list[Broadcast]:
    """The region's history: `sizes.broadcasts` over the 365 days before the anchor."""
    rng = np.random.default_rng(sandbox.seed_for("datahub", region, "broadcasts"))
    anchor = sandbox.clock.anchor
    n = sandbox.config.sizes.broadcasts
    first_id = int(rng.integers(20_000, 90_000))
    days = np.arange(-sandbox.config.history_days, 0)
    weekday = np.array([(anchor + timedelta(days=int(d))).weekday() for d in days])
    shares = WEEKDAY_SHARES[weekday]
    offsets = rng.choice(days, n, p=shares / shares.sum())
    scheduled = rng.random(n) < SCHEDULED_SHARE
    offsets[scheduled] = rng.integers(1, 15, int(scheduled.sum()))
    hours = rng.choice(24, n, p=HOUR_SHARES / HOUR_SHARES.sum())
    minutes = rng.choice((0, 15, 30, 45), n)
    midnight = anchor.replace(hour=0, minute=0, second=0)
    sent_dates = [
        midnight + timedelta(days=int(d), hours=int(h), minutes=int(m))
        for d, h, m in zip(offsets, hours, minutes, strict=True)
    ]
    order = sorted(range(n), key=sent_dates.__getitem__)
    lead_hours = rng.uniform(1, 24 * 7, n)
    sent = np.maximum(1, (audience * rng.uniform(0.05, 0.6, n)).astype(int))
    open_rate = rng.uniform(0.15, 0.55, n)
    click_rate = rng.uniform(0.05, 0.35, n)
    names = rng.integers(0, len(NAMES), n)
    segments = rng.integers(0, len(SEGMENTS), n)
    sources = rng.random(n) < 0.3
    found = []
    for position, i in enumerate(order):
        created = min(
            sent_dates[i] - timedelta(hours=float(lead_hours[i])), anchor - timedelta(hours=1)
        )
        broadcast = Broadcast(
            id=first_id + position,
            source="caac" if sources[i] else "maac",
            name=NAMES[names[i]],
            segment_name=SEGMENTS[segments[i]],
            sent_date=sent_dates[i],
            created_at=created.replace(microsecond=0),
        )
        broadcast.days = _figures(sent_dates[i].date(), int(sent[i]), open_rate[i], click_rate[i])
        found.append(broadcast)
    return found


def _figures(sent_on: date, sent: int, open_rate: float, click_rate: float) -> dict:
    """Per-day [sent, opens, clicks]: clicks <= opens on every day, opens in total <= sent."""
    weights = 0.55 ** np.arange(OPEN_DAYS)
    cumulative = np.round(sent * open_rate * np.cumsum(weights) / weights.sum()).astype(int)
    opens = np.diff(cumulative, prepend=0)
    clicks = np.floor(opens * click_rate).astype(int)
    first = sent_on.toordinal()
    days = {first + d: [0, int(opens[d]), int(clicks[d])] for d in range(OPEN_DAYS)}
    days[first][0] = sent
    return days
