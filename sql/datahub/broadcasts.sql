CREATE OR REPLACE VIEW datahub.broadcasts AS
SELECT
    id,
    source,           -- maac or caac
    name,
    sent_date,        -- in the future while scheduled
    status,
    created_at,
    connection
FROM {{ source('datahub', 'broadcasts') }};
