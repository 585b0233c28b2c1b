"""The comment service's own count of trigger logs per closed day, which a range backfill
compares the days beyond its edges with (`pipelines/pull/edges.py`). The daily stats give
the last 90 days in one request: a day's public replies, DMs and failures are its logs, one
each (the check `logs_match_daily_stats` compares them so too). An older day is the
difference of two totals of the list, read again until nothing arrived between them."""

from __future__ import annotations

from collections.abc import Collection
from datetime import date

from pipelines.clients.comment import STATS_MAX_DAYS, CommentClient

#: Readings of an older day's two totals at most: logs arriving between them move both.
READINGS = 3


def logs_per_day(client: CommentClient, days: Collection[date], today: date) -> dict[date, int]:
    """The service's trigger logs of each closed day of `days` (before `today`, within the
    365 days it serves); a day whose count kept moving is left out."""
    recent = [d for d in days if 0 < (today - d).days < STATS_MAX_DAYS]
    counts: dict[date, int] = {}
    if recent:
        stats = client.stats((today - min(recent)).days + 1)
        daily = {
            date.fromisoformat(e.date): e.public_replies + e.dms + e.failed for e in stats.daily
        }
        counts = {day: daily[day] for day in recent if day in daily}
    for day in sorted(set(days) - set(recent)):
        if (today - day).days >= STATS_MAX_DAYS:
            counted = _older_day(client, (today - day).days)
            if counted is not None:
                counts[day] = counted
    return counts


def _older_day(client: CommentClient, back: int) -> int | None:
    """The logs of the day `back` days before today: those of the last `back + 1` days less
    those of the last `back`. The difference holds when the shorter total, read again after
    the longer, is unchanged: no log arrived (or left) between the readings."""

    def total(days: int) -> int:
        return client.logs(days=days, page=0, limit=1)["total"]

    for _ in range(READINGS):
        after = total(back)
        with_day = total(back + 1)
        if total(back) == after:
            return with_day - after
    return None
