"""The daily partitions of time-based streams, from the first day any run lands
(`pipelines/stream_run.py`, `first_sync_day`); today is `pipelines/pull/landing.py`'s `today`."""

from __future__ import annotations

import dagster as dg

from pipelines.pull.landing import PulledStream
from pipelines.stream import Stream
from pipelines.stream_run import first_sync_day

#: Today's partition exists from midnight UTC (end_offset=1): hourly runs re-pull it.
daily = dg.DailyPartitionsDefinition(
    start_date=first_sync_day().isoformat(), end_offset=1, timezone="UTC"
)

#: A backfill of any range is one run that fetches the range in one pass.
single_run = dg.BackfillPolicy.single_run()


def partitions_of(stream: Stream) -> dg.PartitionsDefinition | None:
    """The partitions of a stream's asset and of its every check: `daily` where its runs are
    for days the user picks (`PulledStream.partitioned`), none for the rest."""
    return daily if isinstance(stream, PulledStream) and stream.partitioned else None
