"""The daily partitions of time-based streams (today is `pipelines/landing.py`'s `today`)."""

from __future__ import annotations

import os

import dagster as dg

#: First partition shown in the UI; older days than a service serves fail with a message
#: that says so. Overridable with SYNC_START_DATE.
START_DATE = os.environ.get("SYNC_START_DATE", "2025-01-01")

#: Today's partition exists from midnight UTC (end_offset=1): hourly runs re-pull it.
daily = dg.DailyPartitionsDefinition(start_date=START_DATE, end_offset=1, timezone="UTC")

#: A backfill of any range is one run that fetches the range in one pass.
single_run = dg.BackfillPolicy.single_run()
