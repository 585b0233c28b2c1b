-- Members seen in the landed messages, as `get_member_by_id` returns them now.
CREATE OR REPLACE VIEW conversation.members AS
SELECT
    connection,                         -- region the row came from: default, jp
    channel_id,
    id,
    external_member_id,
    external_channel_id,
    type,                               -- the channel's type
    name,
    display_name,
    original_name,
    email,
    original_email,
    mobile,
    original_mobile,
    gender,
    birthday,
    city,
    country,
    location,
    company,
    custom_id,
    connect_id,
    member_level,
    engagement_level,                   -- Lv1 .. Lv5
    status,                             -- active, inactive, unfollowed
    processing_state,                   -- new, open, pending, resolved, blocked
    assign_type,                        -- case-based, permanent, unassigned
    account_manager,
    star_mark,
    note,
    avatar,
    last_message_at,
    last_member_message_send,
    created_at,
    updated_at,
    looked_up_at,                       -- when the row was looked up (docs/running.md)
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('conversation', 'members') }};
