-- Who each member seen in the messages is assigned to (`get_member_assignment`).
CREATE OR REPLACE VIEW conversation.assignments AS
SELECT
    connection,                         -- region the row came from: default, jp
    channel_id,
    member_id,
    assign_type,                        -- case-based, permanent, unassigned
    team_id,                            -- null when unassigned or no team
    user_id,                            -- null when unassigned
    looked_up_at,                       -- when the row was looked up (docs/running.md)
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('conversation', 'assignments') }};
