-- Teams of each region (`list_teams`; the list form has no `editable`).
CREATE OR REPLACE VIEW conversation.teams AS
SELECT
    connection,                         -- region the row came from: default, jp
    id,
    name,
    description,
    category,
    external_team_id,
    routing_rule,                       -- by-queue, round-robin, manual
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('conversation', 'teams') }};
