"""Every stream's Arrow schema, written out: the lake holds files of these schemas, so a
change to a client's model (`pipelines/clients/*.py`) that would change a stream's columns
(`pipelines/lake/schemas.py` derives most of them from the models) fails here first.

Every column is nullable; the `options` struct's fields too."""

import pyarrow as pa
import pytest

from pipelines.clients.comment import _REQUIRED, LOG_SCHEMA, LOG_TABLE
from pipelines.lake import file_schema
from pipelines.stream import Stream
from pipelines.streams.comment import STREAMS as COMMENT
from pipelines.streams.comment import TRIGGER_LOGS
from pipelines.streams.conversation import STREAMS as CONVERSATION
from pipelines.streams.datahub import STREAMS as DATAHUB

TEXT, INT, BOOL, DAY = pa.string(), pa.int64(), pa.bool_(), pa.date32()
#: Every date-time of the lake: UTC microseconds (files of the older seconds type still read,
#: tests/pipelines/test_lake.py).
MICROSECONDS = pa.timestamp("us", tz="UTC")
OPTION = pa.struct(
    [
        ("id", INT),
        ("key", TEXT),
        ("name", TEXT),
        ("description", TEXT),
        ("position", INT),
        ("active", BOOL),
    ]
)

EXPECTED = {
    "comment.workspace": [
        ("connection", TEXT),
        ("id", TEXT),
        ("name", TEXT),
        ("plan", TEXT),
        ("trial_ends_at", MICROSECONDS),
        ("service_status", TEXT),
        ("billing_url", TEXT),
        ("user", TEXT),
        ("usage", TEXT),
        ("api_key_scope", TEXT),
    ],
    "comment.accounts": [
        ("connection", TEXT),
        ("id", TEXT),
        ("platform", TEXT),
        ("handle", TEXT),
        ("username", TEXT),
        ("page_name", TEXT),
        ("supported_triggers", pa.list_(TEXT)),
        ("token_expires_at", MICROSECONDS),
        ("connected_at", MICROSECONDS),
    ],
    "comment.posts": [
        ("connection", TEXT),
        ("account_id", TEXT),
        ("kind", TEXT),
        ("id", TEXT),
        ("caption", TEXT),
        ("media_type", TEXT),
        ("timestamp", MICROSECONDS),
        ("permalink", TEXT),
    ],
    "comment.activities": [
        ("connection", TEXT),
        ("id", TEXT),
        ("name", TEXT),
        ("status", TEXT),
        ("account_id", TEXT),
        ("platform", TEXT),
        ("trigger", TEXT),
        ("keywords", pa.list_(TEXT)),
        ("match", TEXT),
        ("public_replies", pa.list_(TEXT)),
        ("dm", TEXT),
        ("post_scope", TEXT),
        ("post_ids", pa.list_(TEXT)),
        ("follow_gate", TEXT),
        ("start_at", MICROSECONDS),
        ("end_at", MICROSECONDS),
        ("created_at", MICROSECONDS),
        ("updated_at", MICROSECONDS),
        ("dashboard_url", TEXT),
        ("public_replies_sent", INT),
        ("dms_sent", INT),
    ],
    "comment.activity_daily": [
        ("connection", TEXT),
        ("activity_id", TEXT),
        ("date", DAY),
        ("successful_triggers", INT),
    ],
    "comment.trigger_logs": [
        ("connection", TEXT),
        ("id", TEXT),
        ("activity_id", TEXT),
        ("activity_name", TEXT),
        ("account_id", TEXT),
        ("trigger", TEXT),
        ("username", TEXT),
        ("comment_text", TEXT),
        ("post_id", TEXT),
        ("action", TEXT),
        ("status", TEXT),
        ("error", TEXT),
        ("created_at", MICROSECONDS),
    ],
    "comment.daily_stats": [
        ("connection", TEXT),
        ("public_replies", INT),
        ("dms", INT),
        ("failed", INT),
    ],
    "conversation.channels": [
        ("connection", TEXT),
        ("id", INT),
        ("uuid", TEXT),
        ("name", TEXT),
        ("type", TEXT),
        ("status", TEXT),
        ("language_code", TEXT),
        ("timezone", TEXT),
        ("external_channel_id", TEXT),
        ("external_access_token_expired_at", MICROSECONDS),
        ("broadcast_enabled", BOOL),
        ("user_recognition_enabled", BOOL),
        ("created_at", MICROSECONDS),
        ("updated_at", MICROSECONDS),
    ],
    "conversation.teams": [
        ("connection", TEXT),
        ("id", INT),
        ("name", TEXT),
        ("description", TEXT),
        ("category", TEXT),
        ("external_team_id", TEXT),
        ("routing_rule", TEXT),
    ],
    "conversation.users": [
        ("connection", TEXT),
        ("id", INT),
        ("name", TEXT),
        ("chat_name", TEXT),
        ("avatar", TEXT),
        ("external_user_id", TEXT),
        ("created_at", MICROSECONDS),
        ("role_name", TEXT),
        ("role_type", TEXT),
        ("on_duty_status", TEXT),
        ("status", TEXT),
        ("type", TEXT),
        ("is_internal_user", BOOL),
    ],
    "conversation.messages": [
        ("connection", TEXT),
        ("message_uuid", TEXT),
        ("conversation_id", INT),
        ("channel_id", INT),
        ("member_id", INT),
        ("sender_type", TEXT),
        ("sender_id", INT),
        ("message_type", TEXT),
        ("text", TEXT),
        ("url", TEXT),
        ("mime_type", TEXT),
        ("timestamp", MICROSECONDS),
    ],
    "conversation.members": [
        ("connection", TEXT),
        ("channel_id", INT),
        ("id", INT),
        ("account_manager", TEXT),
        ("assign_type", TEXT),
        ("avatar", TEXT),
        ("birthday", TEXT),
        ("city", TEXT),
        ("company", TEXT),
        ("connect_id", TEXT),
        ("country", TEXT),
        ("created_at", MICROSECONDS),
        ("custom_id", TEXT),
        ("display_name", TEXT),
        ("email", TEXT),
        ("engagement_level", TEXT),
        ("external_channel_id", TEXT),
        ("external_member_id", TEXT),
        ("gender", TEXT),
        ("last_member_message_send", MICROSECONDS),
        ("last_message_at", MICROSECONDS),
        ("location", TEXT),
        ("member_level", TEXT),
        ("mobile", TEXT),
        ("name", TEXT),
        ("note", TEXT),
        ("original_email", TEXT),
        ("original_mobile", TEXT),
        ("original_name", TEXT),
        ("processing_state", TEXT),
        ("star_mark", BOOL),
        ("status", TEXT),
        ("type", TEXT),
        ("updated_at", MICROSECONDS),
        ("looked_up_at", MICROSECONDS),
    ],
    "conversation.assignments": [
        ("connection", TEXT),
        ("channel_id", INT),
        ("member_id", INT),
        ("assign_type", TEXT),
        ("team_id", INT),
        ("user_id", INT),
        ("looked_up_at", MICROSECONDS),
    ],
    "datahub.custom_fields": [
        ("id", INT),
        ("name", TEXT),
        ("key", TEXT),
        ("type", TEXT),
        ("description", TEXT),
        ("slot_number", INT),
        ("active", BOOL),
        ("options", pa.list_(OPTION)),
        ("connection", TEXT),
    ],
    "datahub.broadcasts": [
        ("id", INT),
        ("source", TEXT),
        ("name", TEXT),
        ("sent_date", MICROSECONDS),
        ("status", TEXT),
        ("created_at", MICROSECONDS),
        ("connection", TEXT),
    ],
    "datahub.broadcast_reports": [
        ("broadcast_id", INT),
        ("name", TEXT),
        ("source", TEXT),
        ("sent_date", MICROSECONDS),
        ("segment_name", TEXT),
        ("sent", INT),
        ("open_count", INT),
        ("clicks", INT),
        ("start_date", DAY),
        ("end_date", DAY),
        ("connection", TEXT),
        ("report", TEXT),
    ],
    "datahub.members": [
        ("member_id", INT),
        ("customer_id", TEXT),
        ("connect_id", TEXT),
        ("full_name", TEXT),
        ("display_name", TEXT),
        ("display_email", TEXT),
        ("display_mobile", TEXT),
        ("gender", TEXT),
        ("birthday", TEXT),
        ("region", TEXT),
        ("city", TEXT),
        ("address", TEXT),
        ("company", TEXT),
        ("member_level", TEXT),
        ("source", TEXT),
        ("line_uid", TEXT),
        ("channel_type", TEXT),
        ("external_member_id", TEXT),
        ("account_manager", TEXT),
        ("connection", TEXT),
    ],
}

STREAMS = {stream.relation: stream for stream in COMMENT + CONVERSATION + DATAHUB}


def test_every_stream_is_pinned():
    assert sorted(STREAMS) == sorted(EXPECTED)


@pytest.mark.parametrize("relation", sorted(EXPECTED))
def test_stream_schema(relation: str):
    """The declared columns, then `_extra`, last, where what the service sent beyond them is
    kept (pipelines/lake/drift.py)."""
    stream: Stream = STREAMS[relation]
    expected = [*EXPECTED[relation], ("_extra", TEXT)]
    found = [(field.name, field.type, field.nullable) for field in stream.schema]
    assert found == [(name, type_, True) for name, type_ in expected]
    assert stream.schema.metadata is None
    # The columns' descriptions are the catalog's: the files are written without them.
    assert file_schema(stream.schema).equals(pa.schema(expected), check_metadata=True)


def test_trigger_logs_are_the_client_table_after_the_connection():
    assert TRIGGER_LOGS.schema.remove(0).equals(LOG_TABLE)
    assert LOG_TABLE.remove(LOG_TABLE.get_field_index("_extra")).equals(
        LOG_SCHEMA, check_metadata=True
    )


def test_required_trigger_log_fields():
    """The fields a page of trigger logs read by Arrow must not miss (`TriggerLog`)."""
    assert _REQUIRED == ("id", "account_id", "trigger", "action", "status", "created_at")
