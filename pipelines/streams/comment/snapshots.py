"""The rows of the comment service's snapshot streams, each read whole at every pull.

Each function (or `RecentPosts.rows`) is a row function of `land_snapshot`
(`pipelines/landing.py`): per connection, the stream's rows as plain dicts of its schema
(`pipelines/streams/comment/__init__.py`), without the `connection` the landing adds.
"""

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pipelines.clients.base import Connection
from pipelines.clients.comment import CommentClient
from pipelines.landing import Landed, Pull
from pipelines.schemas import model_row
from pipelines.streams.comment import ACCOUNTS, ACTIVITIES, ACTIVITY_DAILY, POSTS, WORKSPACE
from pipelines.transport import ServiceError, Transport

#: Both lists of recent media an account has: feed posts and stories.
POST_KINDS = ("posts", "story")


def workspace_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    """The key's workspace (`GET /me`): one row; of the key, only its scope."""
    me = CommentClient(transport).me()
    yield {
        **model_row(me.workspace, WORKSPACE.schema, extra=False),  # in `me`'s
        **model_row(me, WORKSPACE.schema),
        "api_key_scope": (me.api_key or {}).get("scope"),
    }


def account_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    for account in CommentClient(transport).accounts().accounts:
        yield model_row(account, ACCOUNTS.schema)


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
                    yield {**model_row(post, POSTS.schema), "account_id": account.id, "kind": kind}


def activity_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    """Every activity with its stats totals; its DM and follow gate kept as JSON."""
    for activity in CommentClient(transport).activities().activities:
        yield {
            **model_row(activity, ACTIVITIES.schema),
            # The stats' drift is in the activity's `_extra` (`stats.<field>`).
            **(model_row(activity.stats, ACTIVITIES.schema, extra=False) if activity.stats else {}),
            # An empty gate (`{}`) is no gate: null, as the lake has always held it.
            "follow_gate": json.dumps(activity.follow_gate) if activity.follow_gate else None,
        }


def activity_daily_rows(transport: Transport, connection: Connection) -> Iterator[dict]:
    """Each activity's trend of successful triggers per day: one request per activity
    (`GET /activities/{id}`), as the list does not carry it."""
    client = CommentClient(transport)
    for activity in client.activities().activities:
        for day in client.activity(activity.id).daily:
            yield {"activity_id": activity.id, **model_row(day, ACTIVITY_DAILY.schema)}


def land_posts(pull: Pull) -> Landed:
    """The posts of every account; the lists that could not be read are `failed_accounts`."""
    recent = RecentPosts(warn=pull.warn)
    landed = pull.snapshot(recent.rows)
    landed.figures["failed_accounts"] = recent.failed
    return landed
