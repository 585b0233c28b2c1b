-- Teams of each region (`list_teams`; the list form has no `editable`).
CREATE OR REPLACE VIEW conversation.teams AS
SELECT
    connection,                         -- region the row came from: default, jp
    id,
    name,
    description,
    category,
    external_team_id,
    routing_rule                        -- by-queue, round-robin, manual
FROM {{ source('conversation', 'teams') }};
