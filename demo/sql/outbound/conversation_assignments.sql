-- Member assignments to write back to the conversation service, one row per decision; the
-- columns are the fields of its manual assignment (`ConversationAssignment` in
-- pipelines/push/validation/conversation.py). Per member (connection, channel_id, member_id)
-- the push sends the newest `updated_at`, and only when it is newer than what the service
-- already accepted. `case-based` and `permanent` need a team_id or a user_id; `unassigned`
-- needs neither. `connection` names the conversation region (default: default).
-- Here: the shop's customers as members of the brand's channels (matched by channel type and
-- member id); one who placed a large order goes to the VIP team for good, one whose order
-- failed to the support team for the case. The newest decision of the two wins.
CREATE OR REPLACE VIEW outbound.conversation_assignments AS
WITH members AS (
    SELECT members.connection, members.channel_id, members.id AS member_id, customers.customer_id
    FROM conversation.members
    JOIN shop.customers
        ON customers.channel_type = members.type
        AND customers.external_member_id = members.external_member_id
),
teams AS (
    SELECT
        connection,
        min(id) FILTER (WHERE name = 'VIP Care') AS vip,
        min(id) FILTER (WHERE name = 'Customer Support') AS support
    FROM conversation.teams
    GROUP BY connection
),
large_orders AS (                       -- when each customer first paid 8,000 TWD or more
    SELECT source_platform_customer_id AS customer_id, min(timestamp) AS decided_at
    FROM shop.orders
    WHERE total_amount >= 8000 AND status IN ('confirmed', 'completed')
    GROUP BY ALL
),
decisions AS (
    SELECT customer_id, 'permanent' AS assign_type, 'vip' AS team, decided_at FROM large_orders
    UNION ALL
    SELECT customer_id, 'case-based', 'support', opened_at FROM shop.support_cases
)
SELECT
    members.connection,                 -- the conversation region
    members.channel_id,
    members.member_id,
    decisions.assign_type,              -- case-based, permanent or unassigned
    CASE decisions.team WHEN 'vip' THEN teams.vip ELSE teams.support END AS team_id,
    NULL::BIGINT AS user_id,            -- the team's routing picks the agent
    decisions.decided_at AS updated_at          -- when it was decided: the newest wins
FROM decisions
JOIN members USING (customer_id)
JOIN teams USING (connection);
