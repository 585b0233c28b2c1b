-- Conversations to close at the conversation service, one row per close; the columns are the
-- fields of its close conversation operation and when the close happened (`ConversationClose`
-- in pipelines/push/validation/conversation.py). Each (connection, channel_id, member_id,
-- closed_at) is sent once. `user_id` is the user it is closed on behalf of. `connection`
-- names the conversation region (default: default).
-- Here: each resolved support case closes the member's conversation, on behalf of the
-- region's first active agent.
CREATE OR REPLACE VIEW outbound.conversation_closes AS
WITH agents AS (
    SELECT connection, min(id) AS user_id
    FROM conversation.users
    WHERE role_type = 'agent' AND type = 'human' AND status = 'active'
    GROUP BY connection
)
SELECT
    members.connection,                 -- the conversation region
    members.channel_id,
    members.id AS member_id,
    agents.user_id,
    support_cases.resolved_at AS closed_at
FROM shop.support_cases
JOIN shop.customers USING (customer_id)
JOIN conversation.members
    ON members.type = customers.channel_type
    AND members.external_member_id = customers.external_member_id
JOIN agents ON agents.connection = members.connection
WHERE support_cases.status = 'resolved';
