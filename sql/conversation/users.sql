-- Users (agents and AI agents) of each region (`list_users`, the list form).
CREATE OR REPLACE VIEW conversation.users AS
SELECT
    connection,                         -- region the row came from: default, jp
    id,
    name,
    chat_name,
    avatar,
    external_user_id,
    created_at,
    role_name,
    role_type,                          -- owner, admin, agent
    on_duty_status,                     -- online, away, offline
    status,                             -- active, invited, deactivated
    type,                               -- human, ai
    is_internal_user,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('conversation', 'users') }};
