"""The comment automation service's streams: what lands in the lake, column by column.

The clients' models (`pipelines/clients/comment.py`) say what the service answers; these
say what the lake keeps of it. How each stream's rows are fetched lives beside them
(`snapshots.py`, `trigger_logs.py`, `daily_stats.py`), and what its checks compare
(`checks.py`); the assets (`assets/comment.py`) only run them through Dagster.
"""

import pyarrow as pa

from pipelines.clients.comment import LOGS_MAX_DAYS, STATS_MAX_DAYS
from pipelines.lake import connection_stream

SERVICE = "comment"

TIMESTAMP = pa.timestamp("s", tz="UTC")

TEXTS = pa.list_(pa.string())

WORKSPACE = connection_stream(
    SERVICE,
    "workspace",
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("plan", pa.string()),
        ("trial_ends_at", TIMESTAMP),
        ("service_status", pa.string()),
        ("billing_url", pa.string()),
        ("user", pa.string()),  # JSON: inner fields "not shown" (spec section 2)
        ("usage", pa.string()),  # JSON
        ("api_key_scope", pa.string()),  # the key itself is never landed
    ],
)

ACCOUNTS = connection_stream(
    SERVICE,
    "accounts",
    [
        ("id", pa.string()),
        ("platform", pa.string()),
        ("handle", pa.string()),
        ("username", pa.string()),
        ("page_name", pa.string()),
        ("supported_triggers", TEXTS),
        ("token_expires_at", TIMESTAMP),
        ("connected_at", TIMESTAMP),
    ],
)

POSTS = connection_stream(
    SERVICE,
    "posts",
    [
        ("account_id", pa.string()),
        ("kind", pa.string()),
        ("id", pa.string()),
        ("caption", pa.string()),
        ("media_type", pa.string()),
        ("timestamp", TIMESTAMP),
        ("permalink", pa.string()),
    ],
    key=("account_id", "kind", "id"),
)

ACTIVITIES = connection_stream(
    SERVICE,
    "activities",
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("status", pa.string()),
        ("account_id", pa.string()),
        ("platform", pa.string()),
        ("trigger", pa.string()),
        ("keywords", TEXTS),
        ("match", pa.string()),
        ("public_replies", TEXTS),
        ("dm", pa.string()),  # JSON: one DM in one of three shapes (spec section 2, DmBlock)
        ("post_scope", pa.string()),
        ("post_ids", TEXTS),
        ("follow_gate", pa.string()),  # JSON
        ("start_at", TIMESTAMP),
        ("end_at", TIMESTAMP),
        ("created_at", TIMESTAMP),
        ("updated_at", TIMESTAMP),
        ("dashboard_url", pa.string()),
        ("public_replies_sent", pa.int64()),
        ("dms_sent", pa.int64()),
    ],
)

ACTIVITY_DAILY = connection_stream(
    SERVICE,
    "activity_daily",
    [("activity_id", pa.string()), ("date", pa.date32()), ("successful_triggers", pa.int64())],
    key=("activity_id", "date"),
)

TRIGGER_LOGS = connection_stream(
    SERVICE,
    "trigger_logs",
    [
        ("id", pa.string()),
        ("activity_id", pa.string()),
        ("activity_name", pa.string()),
        ("account_id", pa.string()),
        ("trigger", pa.string()),
        ("username", pa.string()),
        ("comment_text", pa.string()),
        ("post_id", pa.string()),
        ("action", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("created_at", TIMESTAMP),
    ],
    daily=True,
    history_days=LOGS_MAX_DAYS,
)

DAILY_STATS = connection_stream(
    SERVICE,
    "daily_stats",
    [("public_replies", pa.int64()), ("dms", pa.int64()), ("failed", pa.int64())],
    daily=True,
    key=("date",),
    history_days=STATS_MAX_DAYS,
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
