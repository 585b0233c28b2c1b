-- Every turn the conversation service sent the AI agent, once each (by its request key), with
-- the answer it was given. `date` is the UTC day it was first received. Join the member with
-- `conversation.members` on (channel_id, member_id), and with the data hub's members through
-- `external_member_id` where the brand links them.
CREATE OR REPLACE VIEW conversation.agent_requests AS
SELECT
    date,
    request_key,
    conversation_id,
    org_uuid,          -- the organization: one per region
    version,           -- 1.0 or 1.1
    prompt,
    member_id,
    channel_id,
    channel_type,
    external_member_id,
    participants::JSON AS participants,
    message_count,
    received_at,
    answered_at,       -- null: not answered (its receiver stopped before it could)
    reply_text,
    handover,          -- the reply asks for a human agent
    outcome,           -- replied, default, failed, late, not text
    error,
    latency_ms,
    body::JSON AS body
FROM {{ source('conversation', 'agent_requests') }};
