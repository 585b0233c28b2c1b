"""One comment automation workspace: its data, live traffic, queries and changes.

Time windows are whole UTC days ending today (sandbox choice): `days = n` covers today and the
n - 1 days before it, and logs are served for the last 365 such days, so `/logs` without
`days` equals `/logs?days=365` and a day of `/logs` adds up to that day of `/stats`.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta

import numpy as np

from sandbox.clock import day_counts, iso
from sandbox.comment.data import (
    BILLING_URL,
    CONNECT_URL,
    DAY,
    RETAINED_DAYS,
    AccountRecord,
    ActivityRecord,
    Catalog,
    epoch,
    follow_gate_off,
    generate,
    live_rows,
    midnight,
    moment,
    new_uuid,
    permalink_key,
)
from sandbox.comment.logs import DM, FAILED, PUBLIC_REPLY, STATUSES, SUCCESS, LogTable, log_ids
from sandbox.comment.models import (
    TRIGGER_PLATFORM,
    ActivityCreate,
    ActivityUpdate,
    check_activity,
    check_dm,
)
from sandbox.comment.views import account_view, activity_view, log_views, post_views
from sandbox.context import Sandbox
from sandbox.errors import ApiError, invalid
from sandbox.fakedata import pools

TREND_DAYS = 14  # activity detail trend (spec section 8)
STATS_DAYS_MAX = 90  # GET /stats serves this many days at most (spec section 4)
DEFAULT_NAME = "Untitled activity"
LIVE_DRAWS = 8  # uniform draws per live arrival (see data.live_rows)
LIVE_CHUNK = 50_000  # arrivals derived at once, to bound memory after a long clock advance


def account_not_found(field: str) -> ApiError:
    # Spec section 7 lists the code; section 4 allows 400 but no 404 outside /activities/{id}.
    return ApiError(
        400,
        "account_not_found",
        f"{field}: no connected account with this id",
        field=field,
        action_url=CONNECT_URL,
    )


class Workspace:
    def __init__(self, sandbox: Sandbox, name: str) -> None:
        history = generate(sandbox, name)
        self.sandbox = sandbox
        self.clock = sandbox.clock
        self.id = history.id
        self.name = history.name
        self.plan = history.plan
        self.trial_ends_at = history.trial_ends_at
        self.user = history.user
        self.accounts = history.accounts
        self.activities: list[ActivityRecord | None] = list(history.activities)
        self.account_of_activity = [a.account.id for a in history.activities]
        self.posts = history.posts
        self.logs = history.logs
        self.log_prefix = history.log_prefix
        self.usernames = pools(sandbox.config.seed).usernames
        self._serial = len(history.logs)
        self._arrived = 0
        self._live_rng = np.random.default_rng(sandbox.seed_for("comment", name, "live"))
        self._ids_rng = np.random.default_rng(sandbox.seed_for("comment", name, "created"))
        self._lock = threading.Lock()

    # --- time -----------------------------------------------------------------------------

    def window_start(self, days: int | None = None) -> int:
        """Epoch of the first second of the last `days` UTC days (all retained days if None)."""
        today = self.clock.today()
        return midnight(today - timedelta(days=(days or RETAINED_DAYS) - 1))

    def trial_expired(self) -> bool:
        return self.trial_ends_at is not None and self.clock.now() >= self.trial_ends_at

    def catch_up(self) -> None:
        """Derive the live trigger logs due by now (spec: live traffic, sandbox README)."""
        per_minute = self.sandbox.config.arrivals_per_minute
        if self.clock.frozen or per_minute <= 0:
            return
        with self._lock:
            due = int(self.clock.elapsed() * per_minute / 60)
            anchor = epoch(self.clock.anchor)
            while self._arrived < due:
                k = np.arange(self._arrived, min(due, self._arrived + LIVE_CHUNK))
                self._arrived = int(k[-1]) + 1
                t = anchor + ((k + 1) * 60 / per_minute).astype(np.int64)
                draws = self._live_rng.random((len(k), LIVE_DRAWS))
                rows = live_rows(self.activities, t, draws, len(self.usernames), self.posts)
                if rows is not None:
                    count = len(rows["t"])
                    rows["serial"] = np.arange(self._serial, self._serial + count)
                    self._serial += count
                    self.logs = self.logs.append(LogTable.from_columns(rows))

    # --- lookups --------------------------------------------------------------------------

    def account(self, account_id: str) -> AccountRecord | None:
        return next((a for a in self.accounts if a.id == account_id), None)

    def activity(self, activity_id: str) -> ActivityRecord | None:
        return next((a for a in self.activities if a is not None and a.id == activity_id), None)

    def live_activities(self) -> list[ActivityRecord]:
        return [a for a in self.activities if a is not None]

    # --- reads ----------------------------------------------------------------------------

    def me(self, key: str, scope: str) -> dict:
        today = self.clock.today()
        month = max(midnight(today.replace(day=1)), self.window_start())
        replies, dms, failed = self._counts(self.logs, self.logs.start(month))
        activities = self.live_activities()
        return {
            "user": self.user,
            "workspace": {
                "id": self.id,
                "name": self.name,
                "plan": self.plan,
                "trial_ends_at": _iso(self.trial_ends_at),
                "service_status": "active",
                "billing_url": BILLING_URL,
            },
            "usage": {
                "period": today.strftime("%Y-%m"),
                "public_replies": replies,
                "dms": dms,
                "failed": failed,
                "activities": len(activities),
                "active_activities": sum(a.status == "active" for a in activities),
            },
            "api_key": {"prefix": key[:12] + "…", "scope": scope},
        }

    def account_list(self) -> dict:
        return {"accounts": [account_view(a) for a in self.accounts], "connect_url": CONNECT_URL}

    def recent_posts(self, account: AccountRecord, kind: str) -> list[dict]:
        return post_views(*self._recent(account, kind))

    def _recent(self, account: AccountRecord, kind: str) -> tuple[Catalog, list[int]]:
        """The catalog and the positions the platform lists now, newest first."""
        now = epoch(self.clock.now())
        catalog = account.stories if kind == "story" else account.posts
        published = int(np.searchsorted(catalog.times, now, side="right"))
        if kind == "story":  # a story is up for 24 hours
            first = int(np.searchsorted(catalog.times, now - DAY, side="right"))
        else:
            first = max(0, published - account.recent)
        return catalog, list(range(published - 1, first - 1, -1))

    def activity_list(self, status: str | None, account_id: str | None) -> dict:
        replies, dms = self._activity_stats()
        chosen = [
            a
            for a in self.live_activities()
            if (status is None or a.status == status)
            and (account_id is None or a.account.id == account_id)
        ]
        chosen.sort(key=lambda a: (a.created_at, a.id), reverse=True)  # newest first
        return {
            "activities": [
                activity_view(a, int(replies[a.index]), int(dms[a.index])) for a in chosen
            ]
        }

    def activity_detail(self, activity: ActivityRecord) -> dict:
        replies, dms = self._activity_stats()
        start = self.window_start(TREND_DAYS)
        logs = self.logs
        lo = logs.start(start)
        mine = (logs.activity[lo:] == activity.index) & (logs.status[lo:] == SUCCESS)
        per_day = np.bincount((logs.t[lo:][mine] - start) // DAY, minlength=TREND_DAYS)
        return {
            "activity": activity_view(
                activity, int(replies[activity.index]), int(dms[activity.index])
            ),
            "daily": [
                {"date": _date(start, d), "successful_triggers": int(per_day[d])}
                for d in range(TREND_DAYS)
            ],
        }

    def log_page(
        self,
        *,
        activity_id: str | None,
        account_id: str | None,
        status: str | None,
        days: int | None,
        limit: int,
        page: int,
    ) -> dict:
        logs = self.logs
        lo = logs.start(self.window_start(days))
        rows = self._matching(logs, lo, activity_id, account_id, status)
        total = len(logs) - lo if rows is None else len(rows)
        skip = page * limit
        picked = np.zeros(0, dtype=np.int64)
        if skip < total:  # newest first: page p holds positions [p*limit, (p+1)*limit) from the end
            stop, begin = total - skip, max(0, total - skip - limit)
            picked = (np.arange(lo + begin, lo + stop) if rows is None else rows[begin:stop])[::-1]
        return {"logs": log_views(self, logs, picked), "total": total, "page": page, "limit": limit}

    def stats(self, days: int) -> dict:
        start = self.window_start(days)
        logs = self.logs
        lo = logs.start(start)
        day = (logs.t[lo:] - start) // DAY
        ok = logs.status[lo:] == SUCCESS
        action = logs.action[lo:]
        series = [
            np.bincount(day[rows], minlength=days)[:days]
            for rows in (ok & (action == PUBLIC_REPLY), ok & (action == DM), ~ok)
        ]
        daily = [
            {
                "date": _date(start, d),
                "public_replies": int(series[0][d]),
                "dms": int(series[1][d]),
                "failed": int(series[2][d]),
            }
            for d in range(days)
        ]
        totals = {
            name: sum(entry[name] for entry in daily)
            for name in ("public_replies", "dms", "failed")
        }
        return {"days": days, "daily": daily, "totals": totals}

    def _counts(self, logs: LogTable, lo: int) -> tuple[int, int, int]:
        ok = logs.status[lo:] == SUCCESS
        action = logs.action[lo:]
        return (
            int(np.count_nonzero(ok & (action == PUBLIC_REPLY))),
            int(np.count_nonzero(ok & (action == DM))),
            int(np.count_nonzero(logs.status[lo:] == FAILED)),
        )

    def _activity_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """Successful public replies and DMs per activity index, over the served logs."""
        logs = self.logs
        lo = logs.start(self.window_start())
        ok = logs.status[lo:] == SUCCESS
        who, action = logs.activity[lo:][ok], logs.action[lo:][ok]
        size = len(self.activities)
        return (
            np.bincount(who[action == PUBLIC_REPLY], minlength=size),
            np.bincount(who[action == DM], minlength=size),
        )

    def _matching(
        self,
        logs: LogTable,
        lo: int,
        activity_id: str | None,
        account_id: str | None,
        status: str | None,
    ) -> np.ndarray | None:
        """Row indices from `lo` on that pass the filters; None when nothing is filtered."""
        masks = []
        if activity_id is not None:
            activity = self.activity(activity_id)
            masks.append(logs.activity[lo:] == (activity.index if activity else -1))
        if account_id is not None:
            owned = [i for i, owner in enumerate(self.account_of_activity) if owner == account_id]
            masks.append(np.isin(logs.activity[lo:], owned))
        if status is not None:
            masks.append(logs.status[lo:] == STATUSES.index(status))
        if not masks:
            return None
        return np.flatnonzero(np.logical_and.reduce(masks)) + lo

    # --- changes --------------------------------------------------------------------------

    def create_activity(self, body: ActivityCreate) -> dict:
        account = self.account(body.account_id)
        if account is None:
            raise account_not_found("account_id")
        _check_platform(account, body.trigger)
        if body.dm:
            check_dm(body.dm)
        now = self.clock.now()
        with self._lock:
            activity = ActivityRecord(
                index=len(self.activities),
                id=new_uuid(self._ids_rng),
                account=account,
                name=body.name if body.name is not None else DEFAULT_NAME,
                status=body.status,
                trigger=body.trigger,
                keywords=body.keywords or [],
                match=body.match or "contains",
                public_replies=body.public_replies or [],
                dm=_blocks(body.dm),
                post_scope=body.post_scope or "all",
                post_ids=body.post_ids or None,
                follow_gate=_gate(body.follow_gate),
                start_at=body.start_at,
                end_at=body.end_at,
                created_at=now,
                updated_at=now,
            )
            check_activity(activity)
            activity.post_ids = self._resolve(account, activity.post_ids)
            self.activities.append(activity)
            self.account_of_activity.append(account.id)
        return activity_view(activity, 0, 0)

    def update_activity(self, activity: ActivityRecord, body: ActivityUpdate) -> dict:
        sent = body.model_fields_set
        changes = {name: getattr(body, name) for name in sent}
        if "trigger" in sent:
            _check_platform(activity.account, body.trigger)
        if "dm" in sent:
            check_dm(body.dm)
            changes["dm"] = _blocks(body.dm)
        if "follow_gate" in sent:
            changes["follow_gate"] = _gate(body.follow_gate)
        if "post_ids" in sent:
            changes["post_ids"] = body.post_ids or None
        elif "post_scope" in sent and body.post_scope != "selected":
            changes["post_ids"] = None  # leaving `selected` drops its posts
        if "post_scope" in sent:
            # A `next_post` set now waits for a post published from now on: none is, here.
            changes["next_post"] = None
        with self._lock:
            updated = dataclasses.replace(activity, **changes, updated_at=self.clock.now())
            check_activity(updated)
            if "post_ids" in sent:
                updated.post_ids = self._resolve(activity.account, updated.post_ids)
            self.activities[activity.index] = updated
        replies, dms = self._activity_stats()
        return activity_view(updated, int(replies[updated.index]), int(dms[updated.index]))

    def delete_activity(self, activity: ActivityRecord) -> dict:
        """Spec section 4: deletes the activity and its trigger logs, on every day they fell.

        The spec is silent on whether `/stats` keeps counting deleted logs; here it does not:
        the stats, the totals and `/me` usage are all counted from the logs that remain, so a
        deletion shows on an older day of every one of them (and in the truth per day).
        """
        with self._lock:
            self.activities[activity.index] = None
            self.logs = self.logs.take(self.logs.activity != activity.index)
        return {"deleted": True, "id": activity.id}

    def _resolve(self, account: AccountRecord, post_ids: list[str] | None) -> list[str] | None:
        """Post URLs become post ids, as the platform's live lookup would answer."""
        if not post_ids:
            return None
        resolved = []
        for i, value in enumerate(post_ids):
            if "://" not in value:
                resolved.append(value)
                continue
            post_id = account.permalinks.get(permalink_key(value))
            if post_id is None:
                raise invalid(f"post_ids.{i}", "the URL is not a post of this account")
            resolved.append(post_id)
        return resolved

    # --- ground truth ---------------------------------------------------------------------

    def truth_counts(self) -> dict[str, int]:
        self.catch_up()
        activities = len(self.live_activities())
        return {
            "workspace": 1,
            "accounts": len(self.accounts),
            "posts": len(self._served_post_ids()),
            "activities": activities,
            "activity_daily": activities * TREND_DAYS,
            "trigger_logs": len(self.logs) - self.logs.start(self.window_start()),
            "daily_stats": STATS_DAYS_MAX,
        }

    def truth_ids(self, stream: str) -> list[str]:
        self.catch_up()
        if stream == "accounts":
            return [a.id for a in self.accounts]
        if stream == "activities":
            return [a.id for a in self.live_activities()]
        if stream == "posts":
            return self._served_post_ids()
        if stream == "trigger_logs":
            logs = self.logs
            return log_ids(self.log_prefix, logs.serial[logs.start(self.window_start()) :][::-1])
        raise KeyError(stream)

    def truth_rows(self, stream: str) -> list[dict]:
        """Every activity as `GET /activities` serves it (newest first): what an activity
        is now, whoever changed it (the API, or a test standing in for the dashboard)."""
        if stream != "activities":
            raise KeyError(stream)
        self.catch_up()
        return self.activity_list(None, None)["activities"]

    def truth_days(self, stream: str) -> dict[str, int]:
        """Rows per UTC day of a daily stream, over the days the service serves: trigger logs
        (365 days), daily stats (one row per day, 90 days)."""
        self.catch_up()
        start = self.window_start()  # one reading of the clock for the whole answer
        first, today = moment(start).date(), moment(start).date() + timedelta(RETAINED_DAYS - 1)
        if stream == "trigger_logs":
            logs = self.logs
            return day_counts(logs.t[logs.start(start) :], first, today)
        if stream == "daily_stats":
            first = today - timedelta(days=STATS_DAYS_MAX - 1)
            return {(first + timedelta(days=d)).isoformat(): 1 for d in range(STATS_DAYS_MAX)}
        raise KeyError(stream)

    def shift_logs(self, seconds: int, start: int, end: int) -> int:
        """Move the logs created in [`start`, `end`) (epoch seconds) by `seconds`, ids kept:
        what a restart with another anchor does to every log, here without a restart and to
        any window (a test's rows crossing a day). None may move past now, where live
        arrivals go. Returns how many moved."""
        self.catch_up()
        with self._lock:
            logs = self.logs
            chosen = (logs.t >= start) & (logs.t < end)
            t = np.where(chosen, logs.t + seconds, logs.t)
            if chosen.any() and t[chosen].max() > epoch(self.clock.now()):
                raise ValueError("logs would move past the sandbox's now")
            order = np.lexsort((logs.serial, t))  # ascending (created_at, serial), as kept
            self.logs = dataclasses.replace(logs, t=t).take(order)
            return int(np.count_nonzero(chosen))

    def _served_post_ids(self) -> list[str]:
        ids = []
        for account in self.accounts:
            for kind in ("posts", "story"):
                catalog, positions = self._recent(account, kind)
                ids.extend(catalog.ids[i] for i in positions)
        return ids


def _check_platform(account: AccountRecord, trigger: str) -> None:
    if TRIGGER_PLATFORM[trigger] != account.platform:
        raise invalid("trigger", f"{trigger} is not supported by this {account.platform} account")


def _blocks(blocks) -> list[dict]:
    return [block.model_dump(exclude_unset=True) for block in blocks or ()]


def _gate(gate) -> dict:
    return follow_gate_off() | (gate.model_dump(exclude_unset=True) if gate else {})


def _iso(at: datetime | None) -> str | None:
    return iso(at) if at else None


def _date(start: int, day: int) -> str:
    return moment(start + day * DAY).date().isoformat()
