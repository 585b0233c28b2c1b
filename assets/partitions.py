"""The daily partitions of time-based streams (today is `pipelines/pull/landing.py`'s `today`)."""

from __future__ import annotations

import os
from datetime import date, timedelta

import dagster as dg

from pipelines.pull.landing import PulledStream, today
from pipelines.stream import Stream
from pipelines.warehouse.relations import PULLED


def first_day(on: date) -> date:
    """The oldest day any daily stream's first sync reaches (`Stream.history_days`), counted
    back from `on`. The partitions start there, not at a fixed date, so that the UI never
    shows a year of days the services stopped serving long ago; a day that slips out of a
    service's window while the code location stays loaded says so when run
    (`assets/factory.py`), it does not fail."""
    return on - timedelta(days=max(s.history_days for s in PULLED if s.daily) - 1)


#: First partition shown in the UI: computed when the code location loads, or
#: SYNC_START_DATE (an ISO date) for a fixed one.
START_DATE = os.environ.get("SYNC_START_DATE") or first_day(today()).isoformat()

#: Today's partition exists from midnight UTC (end_offset=1): hourly runs re-pull it.
daily = dg.DailyPartitionsDefinition(start_date=START_DATE, end_offset=1, timezone="UTC")

#: A backfill of any range is one run that fetches the range in one pass.
single_run = dg.BackfillPolicy.single_run()


def partitions_of(stream: Stream) -> dg.PartitionsDefinition | None:
    """The partitions of a stream's asset and of its every check: `daily` where its runs are
    for days the user picks (`PulledStream.partitioned`), none for the rest."""
    return daily if isinstance(stream, PulledStream) and stream.partitioned else None
