-- Connected Instagram, Facebook and Threads accounts of each workspace (`GET /accounts`).
CREATE OR REPLACE VIEW comment.accounts AS
SELECT
    connection,                         -- connection (workspace) the row came from: default, …
    id,
    platform,                           -- instagram, facebook, threads
    handle,
    username,
    page_name,
    supported_triggers,                 -- list of triggers, as in activities.trigger
    token_expires_at,
    connected_at,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('comment', 'accounts') }};
