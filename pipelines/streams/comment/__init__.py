"""The comment automation service's streams: what lands in the lake.

The clients' models (`pipelines/clients/comment.py`) say what the service answers; these
say what the lake keeps of it. How each stream's rows are fetched lives beside them
(`snapshots.py`, `trigger_logs.py`, `daily_stats.py`), and what its checks compare
(`checks.py`); the assets (`assets/comment.py`) only run them through Dagster.

Where a stream's row copies a model, its columns are that model's fields
(`arrow_fields`, `pipelines/schemas.py`): only the columns a row adds are written out here.
"""

import pyarrow as pa

from pipelines.clients.comment import (
    LOG_SCHEMA,
    LOGS_MAX_DAYS,
    STATS_MAX_DAYS,
    Account,
    Activity,
    ActivityStats,
    Me,
    Post,
    StatsDay,
    TrendDay,
    WorkspaceInfo,
)
from pipelines.schemas import arrow_fields
from pipelines.stream import connection_stream

SERVICE = "comment"

WORKSPACE = connection_stream(
    SERVICE,
    "workspace",
    [
        *arrow_fields(WorkspaceInfo),
        # `user` and `usage` as JSON text: the service does not say their inner fields.
        *arrow_fields(Me, exclude=("workspace", "api_key")),
        ("api_key_scope", pa.string()),  # the key itself is never landed
    ],
)

ACCOUNTS = connection_stream(SERVICE, "accounts", arrow_fields(Account))

POSTS = connection_stream(
    SERVICE,
    "posts",
    # The account listed, and which of its lists (`POST_KINDS`, snapshots.py).
    [("account_id", pa.string()), ("kind", pa.string()), *arrow_fields(Post)],
    key=("account_id", "kind", "id"),
)

ACTIVITIES = connection_stream(
    SERVICE,
    "activities",
    # Its stats' totals as columns of their own; `dm` and `follow_gate` as JSON text.
    [
        *arrow_fields(Activity, exclude=("stats",)),
        *arrow_fields(ActivityStats),
    ],
)

ACTIVITY_DAILY = connection_stream(
    SERVICE,
    "activity_daily",
    [("activity_id", pa.string()), *arrow_fields(TrendDay)],
    key=("activity_id", "date"),
)

TRIGGER_LOGS = connection_stream(
    SERVICE,
    "trigger_logs",
    LOG_SCHEMA,
    daily=True,
    history_days=LOGS_MAX_DAYS,
    served_days=LOGS_MAX_DAYS,
)

DAILY_STATS = connection_stream(
    SERVICE,
    "daily_stats",
    arrow_fields(StatsDay, exclude=("date",)),  # the day is the file's folder
    daily=True,
    key=("date",),
    history_days=STATS_MAX_DAYS,
    served_days=STATS_MAX_DAYS,
)

STREAMS = [
    WORKSPACE,
    ACCOUNTS,
    POSTS,
    ACTIVITIES,
    ACTIVITY_DAILY,
    TRIGGER_LOGS,
    DAILY_STATS,
]
