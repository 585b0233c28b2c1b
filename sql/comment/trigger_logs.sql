-- Trigger logs (one per public reply or DM attempt), one partition per UTC day of `created_at`.
CREATE OR REPLACE VIEW comment.trigger_logs AS
SELECT
    connection,                         -- connection (workspace) the row came from: default, …
    date,                               -- UTC day of `created_at` (the partition)
    id,
    activity_id,
    activity_name,
    account_id,
    trigger,                            -- as in activities.trigger
    username,
    comment_text,
    post_id,
    action,
    status,                             -- success, failed
    error,
    created_at,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('comment', 'trigger_logs') }};
