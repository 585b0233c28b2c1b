-- Public replies, DMs and failures of each workspace per UTC day (`GET /stats`; 90 days served).
CREATE OR REPLACE VIEW comment.daily_stats AS
SELECT
    connection,                         -- connection (workspace) the row came from: default, …
    date,                               -- UTC day (the partition)
    public_replies,
    dms,
    failed,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('comment', 'daily_stats') }};
