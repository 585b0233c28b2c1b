"""What the comment service still serves: the last `LOGS_MAX_DAYS` days of trigger logs and
the last `STATS_MAX_DAYS` of daily stats (`pipelines/clients/comment.py`), asked for with a
`days` parameter that counts back from the service's today."""

from datetime import date, timedelta

from pipelines.errors import ServiceRefused


class OutsideServedWindow(ServiceRefused):
    """A pull of days the service no longer serves: asking would land empty days as if
    nothing had happened on them."""


def served_since(days: list[date], served_days: int, what: str, today: date) -> int:
    """The `days` parameter reaching back to the first of `days` (oldest first), or a clear
    refusal when the service serves `served_days` days only."""
    oldest = today - timedelta(days=served_days - 1)
    if days[0] < oldest:
        raise OutsideServedWindow(
            f"{what} for {days[0]} cannot be pulled: the service serves the last {served_days} "
            f"days only, so the oldest day it serves is {oldest}."
        )
    return (today - days[0]).days + 1
