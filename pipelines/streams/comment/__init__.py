"""The comment automation service's streams: what lands in the lake, and how.

The clients' models (`pipelines/clients/comment.py`) say what the service answers; each
stream is declared (a `PulledStream`, `pipelines/pull/landing.py`) beside its row function:
`snapshots.py` (workspace, accounts, posts, activities, activity trends),
`trigger_logs.py` and `daily_stats.py`. `checks.py` says what the checks compare; the
assets (`assets/comment.py`) only run them through Dagster.
"""

from pipelines.pull.landing import PulledStream
from pipelines.streams.comment.daily_stats import DAILY_STATS
from pipelines.streams.comment.snapshots import (
    ACCOUNTS,
    ACTIVITIES,
    ACTIVITY_DAILY,
    POSTS,
    WORKSPACE,
)
from pipelines.streams.comment.trigger_logs import TRIGGER_LOGS

STREAMS: list[PulledStream] = [
    WORKSPACE,
    ACCOUNTS,
    POSTS,
    ACTIVITIES,
    ACTIVITY_DAILY,
    TRIGGER_LOGS,
    DAILY_STATS,
]
