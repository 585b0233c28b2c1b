CREATE OR REPLACE VIEW datahub.broadcasts AS
SELECT
    id,
    source,           -- maac or caac
    name,
    sent_date,        -- in the future while scheduled
    status,
    created_at,
    connection,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('datahub', 'broadcasts') }};
