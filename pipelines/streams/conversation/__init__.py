"""The conversation service's streams: what lands in the lake.

The clients' models (`pipelines/clients/conversation.py`) say what the service answers; these
say what the lake keeps of it. The modules beside this one say how each stream is pulled and
checked, without Dagster: `directory.py` (channels, teams, users), `backups.py` (messages),
`members.py` (members and assignments) and `checks.py`. The assets (`assets/conversation.py`)
run them.

Where a stream's row copies a model, its columns are that model's fields
(`arrow_fields`, `pipelines/schemas.py`): only the columns a row adds are written out here.
"""

import pyarrow as pa

from pipelines.clients.conversation import (
    Assignment,
    AssignmentRelationship,
    Channel,
    Member,
    Team,
    User,
)
from pipelines.schemas import arrow_fields
from pipelines.stream import TIMESTAMP, Stream, connection_stream

SERVICE = "conversation"


CHANNELS = connection_stream(SERVICE, "channels", arrow_fields(Channel))

TEAMS = connection_stream(SERVICE, "teams", arrow_fields(Team))

USERS = connection_stream(SERVICE, "users", arrow_fields(User))

MESSAGES = connection_stream(
    SERVICE,
    "messages",
    # The backup file's columns (the service documents no file format: sandbox/README.md).
    [
        ("message_uuid", pa.string()),
        ("conversation_id", pa.int64()),
        ("channel_id", pa.int64()),
        ("member_id", pa.int64()),
        ("sender_type", pa.string()),
        ("sender_id", pa.int64()),
        ("message_type", pa.string()),
        ("text", pa.string()),
        ("url", pa.string()),
        ("mime_type", pa.string()),
        ("timestamp", TIMESTAMP),
    ],
    daily=True,
    key=("message_uuid",),
    # The service documents no retention: a first sync reaches a full year back from now, which
    # touches 366 calendar days.
    history_days=366,
)

MEMBERS = connection_stream(
    SERVICE,
    "members",
    [("channel_id", pa.int64()), *arrow_fields(Member)],
    # The lookup takes the channel with the id: key on both.
    key=("channel_id", "id"),
)

ASSIGNMENTS = connection_stream(
    SERVICE,
    "assignments",
    # The member looked up, then its assignment with the relationship's ids as columns.
    [
        ("channel_id", pa.int64()),
        ("member_id", pa.int64()),
        *arrow_fields(Assignment, exclude=("assignment_relationship",)),
        *arrow_fields(AssignmentRelationship),
    ],
    key=("channel_id", "member_id"),
)

STREAMS: list[Stream] = [CHANNELS, TEAMS, USERS, MESSAGES, MEMBERS, ASSIGNMENTS]
