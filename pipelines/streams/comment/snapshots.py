"""The rows of the comment service's snapshot streams, each read whole at every pull.

Each function (or `RecentPosts.rows`) is a row function of `land_snapshot`
(`assets/landing.py`): per connection, the stream's rows as plain dicts of its schema
(`pipelines/streams/comment/__init__.py`), without the `connection` the landing adds.
"""

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date

from pipelines.clients.base import Connection
from pipelines.clients.comment import CommentClient
from pipelines.landing import parse_moment
from pipelines.streams.comment import ACCOUNTS, ACTIVITIES, POSTS
from pipelines.transport import ServiceError, Transport

#: Both lists of recent media an account has: feed posts and stories.
POST_KINDS = ("posts", "story")


def workspace_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    """The key's workspace (`GET /me`): one row; of the key, only its scope."""
    me = CommentClient(transport).me()
    workspace = me.workspace
    yield {
        "id": workspace.id,
        "name": workspace.name,
        "plan": workspace.plan,
        "trial_ends_at": parse_moment(workspace.trial_ends_at),
        "service_status": workspace.service_status,
        "billing_url": workspace.billing_url,
        "user": json.dumps(me.user) if me.user is not None else None,
        "usage": json.dumps(me.usage) if me.usage is not None else None,
        "api_key_scope": (me.api_key or {}).get("scope"),
    }


def account_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    for account in CommentClient(transport).accounts().accounts:
        yield {
            **account.model_dump(include=set(ACCOUNTS.schema.names)),
            "token_expires_at": parse_moment(account.token_expires_at),
            "connected_at": parse_moment(account.connected_at),
        }


@dataclass
class RecentPosts:
    """The recent posts and stories of every account, read live from its platform. A
    platform that keeps failing (502 after the transport's retries) costs only that
    account's list: it is recorded in `failed` and reported through `warn`, and the other
    accounts still land."""

    warn: Callable[[str], None]
    #: `connection/account/kind` of each list that could not be read.
    failed: list[str] = field(default_factory=list)

    def rows(self, transport: Transport, connection: Connection) -> Iterator[dict]:
        client = CommentClient(transport)
        for account in client.accounts().accounts:
            for kind in POST_KINDS:
                try:
                    listed = client.posts(account.id, kind).posts
                except ServiceError as error:
                    if error.status != 502:
                        raise
                    self.failed.append(f"{connection.name}/{account.id}/{kind}")
                    self.warn(f"posts of account {account.id} ({kind}): {error}")
                    continue
                for post in listed:
                    yield {
                        **post.model_dump(include=set(POSTS.schema.names)),
                        "account_id": account.id,
                        "kind": kind,
                        "timestamp": parse_moment(post.timestamp),
                    }


def activity_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    """Every activity with its stats totals; its DM and follow gate kept as JSON."""
    for activity in CommentClient(transport).activities().activities:
        row = activity.model_dump(include=set(ACTIVITIES.schema.names))
        row.update(
            dm=json.dumps(activity.dm),
            follow_gate=json.dumps(activity.follow_gate) if activity.follow_gate else None,
            start_at=parse_moment(activity.start_at),
            end_at=parse_moment(activity.end_at),
            created_at=parse_moment(activity.created_at),
            updated_at=parse_moment(activity.updated_at),
            public_replies_sent=activity.stats.public_replies_sent if activity.stats else None,
            dms_sent=activity.stats.dms_sent if activity.stats else None,
        )
        yield row


def activity_daily_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    """Each activity's trend of successful triggers per day: one request per activity
    (`GET /activities/{id}`), as the list does not carry it."""
    client = CommentClient(transport)
    for activity in client.activities().activities:
        for day in client.activity(activity.id).daily:
            yield {
                "activity_id": activity.id,
                "date": date.fromisoformat(day.date),
                "successful_triggers": day.successful_triggers,
            }
