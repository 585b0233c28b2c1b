"""The customer data hub's streams: what lands in the lake.

The clients' models (`pipelines/clients/datahub.py`) say what the service answers; these
say what the lake keeps of it. How each stream's rows are fetched lives beside them
(`snapshots.py`: custom fields and broadcasts; `reports.py`: the daily broadcast reports;
`export.py`: members through the export task), as does what the checks compare
(`checks.py`); the assets (`assets/datahub.py`) only run these and report to Dagster.

Where a stream's row copies a model, its columns are that model's fields
(`arrow_fields`, `pipelines/schemas.py`): only the columns a row adds are written out here.
"""

import pyarrow as pa

from pipelines.clients.datahub import Broadcast, BroadcastReport, CustomField
from pipelines.lake import Stream
from pipelines.schemas import arrow_fields

SERVICE = "datahub"


CUSTOM_FIELDS = Stream(
    SERVICE,
    "custom_fields",
    pa.schema([*arrow_fields(CustomField), ("connection", pa.string())]),
)

BROADCASTS = Stream(
    SERVICE,
    "broadcasts",
    pa.schema([*arrow_fields(Broadcast), ("connection", pa.string())]),
)

BROADCAST_REPORTS = Stream(
    SERVICE,
    "broadcast_reports",
    pa.schema(
        [
            ("broadcast_id", pa.int64()),
            *arrow_fields(BroadcastReport),
            # The date range the report's figures are over.
            ("start_date", pa.date32()),
            ("end_date", pa.date32()),
            ("connection", pa.string()),
            # Further fields of the report, undocumented by the hub ("not shown"), as JSON.
            ("report", pa.string()),
        ]
    ),
    daily=True,
    # A broadcast has one snapshot per day; `date` is the hive folder's column (DuckDB reads
    # it from the path, also in `unique_ids_check`).
    key=("date", "broadcast_id"),
)

#: The export file's columns besides `member_id` (the hub's contact profile fields).
MEMBER_TEXT_COLUMNS = (
    "customer_id",
    "connect_id",
    "full_name",
    "display_name",
    "display_email",
    "display_mobile",
    "gender",
    "birthday",
    "region",
    "city",
    "address",
    "company",
    "member_level",
    "source",
    "line_uid",
    "channel_type",
    "external_member_id",
    "account_manager",
)

MEMBERS = Stream(
    SERVICE,
    "members",
    pa.schema(
        [
            ("member_id", pa.int64()),
            *((name, pa.string()) for name in MEMBER_TEXT_COLUMNS),
            ("connection", pa.string()),
        ]
    ),
    # One export per connection and day, kept: the latest is `datahub.members`, the
    # sequence is the profiles' change history (`marts.member_profile_history`).
    daily=True,
    key=("date", "member_id"),
)

STREAMS: list[Stream] = [CUSTOM_FIELDS, BROADCASTS, BROADCAST_REPORTS, MEMBERS]
