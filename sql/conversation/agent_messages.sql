-- Every message the AI agent was shown, one row per message (a conversation's messages come
-- again in each of its turns: the first turn that carried it is kept, `turns` counts them).
-- Joins `conversation.messages` on `message_uuid`.
CREATE OR REPLACE VIEW conversation.agent_messages AS
SELECT
    message_uuid,
    conversation_id,
    sender_type,
    sender_id,
    message_type,      -- text or image
    text,              -- empty for an image
    url,               -- version 1.1 images
    mime_type,
    timestamp,
    request_key AS first_request_key,
    count(*) OVER (PARTITION BY message_uuid) AS turns
FROM {{ source('conversation', 'agent_messages') }}
QUALIFY row_number() OVER (PARTITION BY message_uuid ORDER BY date, request_key, position) = 1;
