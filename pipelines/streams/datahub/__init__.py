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
from pipelines.schemas import arrow_fields
from pipelines.stream import CONNECTION, EXTRA, Stream, described

SERVICE = "datahub"


CUSTOM_FIELDS = Stream(
    SERVICE,
    "custom_fields",
    pa.schema([*arrow_fields(CustomField), CONNECTION, EXTRA]),
)

BROADCASTS = Stream(
    SERVICE,
    "broadcasts",
    pa.schema([*arrow_fields(Broadcast), CONNECTION, EXTRA]),
)

BROADCAST_REPORTS = Stream(
    SERVICE,
    "broadcast_reports",
    pa.schema(
        [
            ("broadcast_id", pa.int64()),
            *arrow_fields(BroadcastReport),
            described("start_date", pa.date32(), "First day of the range the figures are over."),
            described("end_date", pa.date32(), "Last day of the range the figures are over."),
            CONNECTION,
            # Further fields of the report, undocumented by the hub ("not shown"), as JSON.
            ("report", pa.string()),
            EXTRA,
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

#: What the hub documents of some contact profile fields.
_PROFILE_NOTES = {
    "display_mobile": "E.164.",
    "gender": "`male`, `female`, `unknown` or `other`.",
    "birthday": "YYYY-MM-DD.",
    "region": "A region or country code.",
    "source": "`maac` or `caac`.",
}

MEMBERS = Stream(
    SERVICE,
    "members",
    pa.schema(
        [
            ("member_id", pa.int64()),
            *(
                described(name, pa.string(), _PROFILE_NOTES[name])
                if name in _PROFILE_NOTES
                else (name, pa.string())
                for name in MEMBER_TEXT_COLUMNS
            ),
            CONNECTION,
            EXTRA,
        ]
    ),
    # One export per connection and day, kept: the latest is `datahub.members`, the
    # sequence is the profiles' change history (`marts.member_profile_history`).
    daily=True,
    key=("date", "member_id"),
)

STREAMS: list[Stream] = [CUSTOM_FIELDS, BROADCASTS, BROADCAST_REPORTS, MEMBERS]
