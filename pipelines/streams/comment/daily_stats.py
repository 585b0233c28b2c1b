"""The `daily_stats` stream: one `GET /stats` for the whole range, one row per day."""

from collections.abc import Iterator
from datetime import date

from pipelines.clients.comment import STATS_MAX_DAYS, CommentAutomation, StatsDay
from pipelines.lake.schemas import arrow_fields, model_row
from pipelines.pull.landing import PulledStream, Turn
from pipelines.stream import connection_schema
from pipelines.streams.comment.served import served_since


def stats_days(turn: Turn) -> Iterator[tuple[date, list[dict]]]:
    """Each day the service reports, back to the first of the run's days, with its one row
    (the landing keeps the days of the run)."""
    window = served_since(turn.days, STATS_MAX_DAYS, "Daily stats", turn.today())
    for entry in turn.client.stats(window).daily:
        yield date.fromisoformat(entry.date), [model_row(entry, turn.stream.schema)]


DAILY_STATS = PulledStream(
    CommentAutomation.service,
    "daily_stats",
    connection_schema(arrow_fields(StatsDay, exclude=("date",))),  # the day is the folder
    daily=True,
    day="The UTC day the figures count (the partition).",
    key=("date",),
    history_days=STATS_MAX_DAYS,
    served_days=STATS_MAX_DAYS,
    rows=stats_days,
    hourly=True,
    description="Public replies, DMs and failures per UTC day (`GET /stats`; 90 days served).",
)
