"""The customer data hub's streams: what lands in the lake, and how.

The clients' models (`pipelines/clients/datahub.py`) say what the service answers; each
stream is declared (a `PulledStream`, `pipelines/pull/landing.py`) beside what fetches it:
`snapshots.py` (custom fields and broadcasts), `reports.py` (the daily broadcast reports)
and `export.py` (members, through the export task). `checks.py` says what the checks
compare; the assets (`assets/datahub.py`) only run these and report to Dagster.
"""

from pipelines.pull.landing import PulledStream
from pipelines.streams.datahub.export import MEMBERS
from pipelines.streams.datahub.reports import BROADCAST_REPORTS
from pipelines.streams.datahub.snapshots import BROADCASTS, CUSTOM_FIELDS

STREAMS: list[PulledStream] = [CUSTOM_FIELDS, BROADCASTS, BROADCAST_REPORTS, MEMBERS]
