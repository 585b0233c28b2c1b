-- Channels of each region: the full records of `list_channels`.
CREATE OR REPLACE VIEW conversation.channels AS
SELECT
    connection,                         -- region the row came from: default, jp
    id,
    uuid,
    name,
    type,                               -- fb, ig, line, whatsapp, wccs
    status,                             -- connected, disconnected
    language_code,
    timezone,
    external_channel_id,
    external_access_token_expired_at,
    broadcast_enabled,
    user_recognition_enabled,
    created_at,
    updated_at,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('conversation', 'channels') }};
