-- Messages, one partition per UTC day of `timestamp`, from the message backups.
CREATE OR REPLACE VIEW conversation.messages AS
SELECT
    connection,                         -- region the row came from: default, jp
    date,                               -- UTC day of `timestamp` (the partition)
    message_uuid,
    conversation_id,                    -- a member's run of messages without a day of silence
    channel_id,
    member_id,
    sender_type,                        -- member, user (an agent), bot
    sender_id,                          -- the member's id when sender_type = 'member'
    message_type,                       -- text, image
    text,                               -- '' for images
    url,                                -- images only
    mime_type,                          -- images only
    timestamp,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('conversation', 'messages') }};
