"""The rows of `daily_stats`: one `GET /stats` for the whole range, one row per day."""

from collections.abc import Iterator
from datetime import date

from pipelines.clients.base import Connection
from pipelines.clients.comment import STATS_MAX_DAYS, CommentClient
from pipelines.schemas import model_row
from pipelines.streams.comment import DAILY_STATS
from pipelines.streams.comment.served import served_since
from pipelines.transport import Transport


def stats_days(
    transport: Transport, connection: Connection, days: list[date], today: date
) -> Iterator[tuple[date, list[dict]]]:
    """Each day the service reports, back to the first of `days`, with its one row (a row
    function of `land_days`, `pipelines/landing.py`, which keeps the days of its range)."""
    window = served_since(days, STATS_MAX_DAYS, "Daily stats", today)
    for entry in CommentClient(transport).stats(window).daily:
        yield date.fromisoformat(entry.date), [model_row(entry, DAILY_STATS.schema)]
