-- Each activity's 14-day trend of successful triggers per day (`GET /activities/{id}`).
CREATE OR REPLACE VIEW comment.activity_daily AS
SELECT
    connection,                         -- connection (workspace) the row came from: default, …
    activity_id,
    date,
    successful_triggers,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('comment', 'activity_daily') }};
