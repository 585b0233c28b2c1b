-- The workspace of each key (`GET /me`): plan, trial end, service status; of the key, its scope.
CREATE OR REPLACE VIEW comment.workspace AS
SELECT
    connection,                         -- connection (workspace) the row came from: default, …
    id,
    name,
    plan,
    trial_ends_at,
    service_status,
    billing_url,
    user,                               -- JSON text; the spec shows no inner fields
    usage,                              -- JSON text or null; the spec shows no inner fields
    api_key_scope,                      -- read, read+write (the key itself is never landed)
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('comment', 'workspace') }};
