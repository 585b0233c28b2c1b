-- Every turn the conversation service sent the AI agent, once each (by its request key), with
-- the answer it was given. `date` is the UTC day it was first received. Join the member with
-- `conversation.members` on (channel_id, member_id), and with the data hub's members through
-- `external_member_id` where the brand links them.
--
-- A routed handover (the reply function's `{"handover": {"team_id": N}}`) is pushed as the
-- member's assignment (docs/agent.md, "Routed handovers"); `routing` says how that went, from
-- the push's ledger and rejected rows: `assigned` (the service accepted it), `refused` (its
-- reason in `routing_error`), `superseded` (a newer assignment of the member went instead),
-- or `pending` (not pushed yet).
CREATE OR REPLACE VIEW conversation.agent_requests AS
WITH requests AS (
    SELECT
        *,
        handover_connection || ':' || channel_id || ':' || member_id AS assignment_key
    FROM {{ source('conversation', 'agent_requests') }}
),
assigned AS (
    SELECT key, timestamp, max(timestamp) OVER (PARTITION BY key) AS newest
    FROM {{ source('sync', 'pushed') }}
    WHERE record_type = 'conversation_assignment' AND state = 'accepted'
        AND key IN (SELECT assignment_key FROM requests)
),
refused AS (
    SELECT key, (row::JSON->>'updated_at')::TIMESTAMPTZ AS updated_at,
        any_value(field || ': ' || reason) AS reason
    FROM {{ source('sync', 'rejected') }}
    WHERE record_type = 'conversation_assignment' AND source = 'service'
        AND key IN (SELECT assignment_key FROM requests)
    GROUP BY ALL
)
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
    outcome,           -- replied, routed, default, failed, late, not text
    error,
    latency_ms,
    handover_team_id,      -- a routed handover's team or user; null: not routed
    handover_user_id,
    handover_assign_type,  -- case-based or permanent
    handover_connection,   -- the conversation connection it is assigned through
    CASE
        WHEN assignment_key IS NULL THEN NULL
        WHEN EXISTS (
            SELECT 1 FROM assigned AS a
            WHERE a.key = assignment_key AND a.timestamp = answered_at
        ) THEN 'assigned'
        WHEN EXISTS (
            SELECT 1 FROM refused AS r
            WHERE r.key = assignment_key AND r.updated_at = answered_at
        ) THEN 'refused'
        WHEN EXISTS (
            SELECT 1 FROM assigned AS a
            WHERE a.key = assignment_key AND a.newest > answered_at
        ) THEN 'superseded'
        ELSE 'pending'
    END AS routing,
    (
        SELECT any_value(r.reason) FROM refused AS r
        WHERE r.key = assignment_key AND r.updated_at = answered_at
    ) AS routing_error,
    body::JSON AS body
FROM requests;
