"""The conversation service's streams: what lands in the lake, column by column.

The clients' models (`pipelines/clients/conversation.py`) say what the service answers; these
say what the lake keeps of it. The modules beside this one say how each stream is pulled and
checked, without Dagster: `directory.py` (channels, teams, users), `backups.py` (messages),
`members.py` (members and assignments) and `checks.py`. The assets (`assets/conversation.py`)
run them.
"""

import pyarrow as pa

from pipelines.lake import Stream, connection_stream

SERVICE = "conversation"

#: Microseconds: the spec does not bound the precision of its timestamps.
TIMESTAMP = pa.timestamp("us", tz="UTC")

CHANNELS = connection_stream(
    SERVICE,
    "channels",
    [
        ("id", pa.int64()),
        ("uuid", pa.string()),
        ("name", pa.string()),
        ("type", pa.string()),
        ("status", pa.string()),
        ("language_code", pa.string()),
        ("timezone", pa.string()),
        ("external_channel_id", pa.string()),
        ("external_access_token_expired_at", TIMESTAMP),
        ("broadcast_enabled", pa.bool_()),
        ("user_recognition_enabled", pa.bool_()),
        ("created_at", TIMESTAMP),
        ("updated_at", TIMESTAMP),
    ],
)

TEAMS = connection_stream(
    SERVICE,
    "teams",
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("category", pa.string()),
        ("external_team_id", pa.string()),
        ("routing_rule", pa.string()),
    ],
)

USERS = connection_stream(
    SERVICE,
    "users",
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("chat_name", pa.string()),
        ("avatar", pa.string()),
        ("external_user_id", pa.string()),
        ("created_at", TIMESTAMP),
        ("role_name", pa.string()),
        ("role_type", pa.string()),
        ("on_duty_status", pa.string()),
        ("status", pa.string()),
        ("type", pa.string()),
        ("is_internal_user", pa.bool_()),
    ],
)

MESSAGES = connection_stream(
    SERVICE,
    "messages",
    # The backup file's columns (sandbox README: the spec shows no file format).
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
    # The spec shows no retention: a first sync reaches a full year back from now, which
    # touches 366 calendar days.
    history_days=366,
)

MEMBERS = connection_stream(
    SERVICE,
    "members",
    [
        ("channel_id", pa.int64()),
        ("id", pa.int64()),
        ("account_manager", pa.string()),
        ("assign_type", pa.string()),
        ("avatar", pa.string()),
        ("birthday", pa.string()),
        ("city", pa.string()),
        ("company", pa.string()),
        ("connect_id", pa.string()),
        ("country", pa.string()),
        ("created_at", TIMESTAMP),
        ("custom_id", pa.string()),
        ("display_name", pa.string()),
        ("email", pa.string()),
        ("engagement_level", pa.string()),
        ("external_channel_id", pa.string()),
        ("external_member_id", pa.string()),
        ("gender", pa.string()),
        ("last_member_message_send", TIMESTAMP),
        ("last_message_at", TIMESTAMP),
        ("location", pa.string()),
        ("member_level", pa.string()),
        ("mobile", pa.string()),
        ("name", pa.string()),
        ("note", pa.string()),
        ("original_email", pa.string()),
        ("original_mobile", pa.string()),
        ("original_name", pa.string()),
        ("processing_state", pa.string()),
        ("star_mark", pa.bool_()),
        ("status", pa.string()),
        ("type", pa.string()),
        ("updated_at", TIMESTAMP),
    ],
    # The lookup takes the channel with the id (spec section 4): key on both.
    key=("channel_id", "id"),
)

ASSIGNMENTS = connection_stream(
    SERVICE,
    "assignments",
    [
        ("channel_id", pa.int64()),
        ("member_id", pa.int64()),
        ("assign_type", pa.string()),
        ("team_id", pa.int64()),
        ("user_id", pa.int64()),
    ],
    key=("channel_id", "member_id"),
)

STREAMS: list[Stream] = [CHANNELS, TEAMS, USERS, MESSAGES, MEMBERS, ASSIGNMENTS]
