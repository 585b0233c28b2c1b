"""The comment service's snapshot streams, each read whole at every pull: each declared with
its row function (`pipelines/pull/landing.py`), which returns one connection's rows as plain dicts
of the stream's schema, without the `connection` the landing adds.

Where a stream's row copies a model, its columns are that model's fields (`arrow_fields`,
`pipelines/lake/schemas.py`): only the columns a row adds are written out here.
"""

import json
from collections.abc import Iterator

import pyarrow as pa

from pipelines.clients.comment import (
    Account,
    Activity,
    ActivityStats,
    CommentAutomation,
    Me,
    Post,
    TrendDay,
    WorkspaceInfo,
)
from pipelines.lake.schemas import arrow_fields, model_row
from pipelines.pull.landing import PulledStream, Turn
from pipelines.stream import connection_schema, described
from pipelines.streams.listed import listed_stream
from pipelines.transport import ServiceError

#: Both lists of recent media an account has: feed posts and stories.
POST_KINDS = ("posts", "story")


def workspace_rows(turn: Turn) -> Iterator[dict]:
    """The key's workspace (`GET /me`): one row; of the key, only its scope."""
    me, schema = turn.client.me(), turn.stream.schema
    yield {
        **model_row(me.workspace, schema, extra=False),  # in `me`'s
        **model_row(me, schema),
        "api_key_scope": (me.api_key or {}).get("scope"),
    }


WORKSPACE = PulledStream(
    CommentAutomation.service,
    "workspace",
    connection_schema(
        [
            *arrow_fields(WorkspaceInfo),
            # `user` and `usage` as JSON text: the service does not say their inner fields.
            *arrow_fields(Me, exclude=("workspace", "api_key")),
            # The key itself is never landed.
            described(
                "api_key_scope",
                pa.string(),
                "The scope of the connection's API key: `read` or `read+write`.",
            ),
        ]
    ),
    rows=workspace_rows,
    description="The workspace of each key (`GET /me`): plan, trial end, service status.",
)


ACCOUNTS = listed_stream(
    CommentAutomation.service,
    "accounts",
    connection_schema(arrow_fields(Account)),
    lambda client: client.accounts().accounts,
    description="Connected Instagram, Facebook and Threads accounts and their token expiry.",
)


def post_rows(turn: Turn) -> Iterator[dict]:
    """The recent posts and stories of every account, read live from its platform. A
    platform that keeps failing (502 after the transport's retries) costs only that
    account's list: it is reported (`failed_accounts`, `account/kind` per connection) and
    the other accounts still land."""
    client, failed = turn.client, []
    turn.report("failed_accounts", failed)
    for account in client.accounts().accounts:
        for kind in POST_KINDS:
            try:
                listed = client.posts(account.id, kind).posts
            except ServiceError as error:
                if error.status != 502:
                    raise
                failed.append(f"{account.id}/{kind}")
                turn.warn(f"posts of account {account.id} ({kind}): {error}")
                continue
            for post in listed:
                row = model_row(post, turn.stream.schema)
                yield {**row, "account_id": account.id, "kind": kind}


POSTS = PulledStream(
    CommentAutomation.service,
    "posts",
    # The account listed, and which of its lists (`POST_KINDS`).
    connection_schema(
        [
            described(
                "account_id", pa.string(), "The account whose list it is (an account's `id`)."
            ),
            described(
                "kind",
                pa.string(),
                "Which of the account's lists it is in (the `kind` asked of "
                "`GET /accounts/{id}/posts`): `posts` or `story`.",
            ),
            *arrow_fields(Post),
        ]
    ),
    key=("account_id", "kind", "id"),
    rows=post_rows,
    description=(
        "Recent posts and stories per account, read live from the platform. An account whose "
        "platform keeps failing (502 after retries) is reported in `failed_accounts`; the "
        "others still land."
    ),
    upstream=("accounts",),
)


def activity_rows(turn: Turn) -> Iterator[dict]:
    """Every activity with its stats totals; its DM and follow gate kept as JSON."""
    schema = turn.stream.schema
    for activity in turn.client.activities().activities:
        yield {
            **model_row(activity, schema),
            # The stats' drift is in the activity's `_extra` (`stats.<field>`).
            **(model_row(activity.stats, schema, extra=False) if activity.stats else {}),
            # An empty gate (`{}`) is no gate: null, as the lake has always held it.
            "follow_gate": json.dumps(activity.follow_gate) if activity.follow_gate else None,
        }


ACTIVITIES = PulledStream(
    CommentAutomation.service,
    "activities",
    # Its stats' totals as columns of their own; `dm` and `follow_gate` as JSON text.
    connection_schema([*arrow_fields(Activity, exclude=("stats",)), *arrow_fields(ActivityStats)]),
    rows=activity_rows,
    description="Every activity (comment automation) with its stats totals.",
)


def activity_daily_rows(turn: Turn) -> Iterator[dict]:
    """Each activity's trend of successful triggers per day: one request per activity
    (`GET /activities/{id}`), as the list does not carry it."""
    client = turn.client
    for activity in client.activities().activities:
        for day in client.activity(activity.id).daily:
            yield {"activity_id": activity.id, **model_row(day, turn.stream.schema)}


ACTIVITY_DAILY = PulledStream(
    CommentAutomation.service,
    "activity_daily",
    connection_schema(
        [
            described("activity_id", pa.string(), "The activity (an activity's `id`)."),
            *arrow_fields(TrendDay),
        ]
    ),
    key=("activity_id", "date"),
    rows=activity_daily_rows,
    description="The 14-day trend of successful triggers per activity (`GET /activities/{id}`).",
    upstream=("activities",),
)
