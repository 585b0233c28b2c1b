-- Each broadcast's latest snapshot: one row per broadcast and connection.
CREATE OR REPLACE VIEW datahub.broadcast_reports AS
SELECT
    date,             -- the day the snapshot was taken
    broadcast_id,
    name,
    source,
    sent_date,
    segment_name,
    sent,
    open_count,
    clicks,
    start_date,
    end_date,
    report::JSON AS report,
    connection,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('datahub', 'broadcast_reports') }}
QUALIFY row_number() OVER (PARTITION BY connection, broadcast_id ORDER BY date DESC) = 1;
