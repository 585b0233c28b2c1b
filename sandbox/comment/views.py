"""Records to response dicts, in the field order of spec section 2."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sandbox.clock import iso
from sandbox.comment.data import (
    DASHBOARD,
    ERROR_TEXTS,
    AccountRecord,
    ActivityRecord,
    Catalog,
    moment,
)
from sandbox.comment.logs import ACTIONS, STATUSES, LogTable, log_ids
from sandbox.comment.models import PLATFORMS, TRIGGER_PLATFORM, TRIGGERS
from sandbox.fakedata import COMMENT_TEXTS

if TYPE_CHECKING:
    from sandbox.comment.workspace import Workspace

PLATFORM_TRIGGERS = {p: [t for t in TRIGGERS if TRIGGER_PLATFORM[t] == p] for p in PLATFORMS}


def account_view(account: AccountRecord) -> dict:
    expires = account.token_expires_at
    return {
        "id": account.id,
        "platform": account.platform,
        "handle": account.handle,
        "username": account.username,
        "page_name": account.page_name,
        "supported_triggers": PLATFORM_TRIGGERS[account.platform],
        "token_expires_at": iso(expires) if expires else None,
        "connected_at": iso(account.connected_at),
    }


def post_views(catalog: Catalog, positions: list[int]) -> list[dict]:
    return [
        {
            "id": catalog.ids[i],
            "caption": catalog.captions[i],
            "media_type": catalog.media_types[i],
            "timestamp": iso(moment(catalog.times[i])),
            "permalink": catalog.permalinks[i],
        }
        for i in positions
    ]


def activity_view(activity: ActivityRecord, public_replies_sent: int, dms_sent: int) -> dict:
    a = activity
    return {
        "id": a.id,
        "name": a.name,
        "status": a.status,
        "account_id": a.account.id,
        "platform": a.account.platform,
        "trigger": a.trigger,
        "keywords": a.keywords,
        "match": a.match,
        "public_replies": a.public_replies,
        "dm": a.dm,
        "post_scope": a.post_scope,
        "post_ids": a.post_ids,
        "follow_gate": a.follow_gate,
        "start_at": iso(a.start_at) if a.start_at else None,
        "end_at": iso(a.end_at) if a.end_at else None,
        "created_at": iso(a.created_at),
        "updated_at": iso(a.updated_at),
        "dashboard_url": f"{DASHBOARD}/activities/{a.id}",
        "stats": {"public_replies_sent": public_replies_sent, "dms_sent": dms_sent},
    }


def log_views(workspace: Workspace, logs: LogTable, rows: np.ndarray) -> list[dict]:
    """The TriggerLog dicts of the given rows only, in the given order."""
    ids = log_ids(workspace.log_prefix, logs.serial[rows])
    columns = zip(
        ids,
        *(
            getattr(logs, name)[rows].tolist()
            for name in (
                "t",
                "activity",
                "trigger",
                "action",
                "status",
                "user",
                "text",
                "post",
                "error",
            )
        ),
        strict=True,
    )
    usernames = workspace.usernames
    result = []
    for log_id, t, activity_at, trigger, action, status, user, text, post, error in columns:
        # None only if the activity was deleted while this page was being read.
        activity = workspace.activities[activity_at]
        result.append(
            {
                "id": log_id,
                "activity_id": activity.id if activity else None,
                "activity_name": activity.name if activity else None,
                "account_id": workspace.account_of_activity[activity_at],
                "trigger": TRIGGERS[trigger],
                "username": usernames[user],
                "comment_text": COMMENT_TEXTS[text] if text >= 0 else None,
                "post_id": workspace.posts.ids[post] if post >= 0 else None,
                "action": ACTIONS[action],
                "status": STATUSES[status],
                "error": ERROR_TEXTS[error] if error >= 0 else None,
                "created_at": iso(moment(t)),
            }
        )
    return result
