-- Every daily snapshot of every broadcast's report: `date` is the day it was taken, its
-- figures cover start_date..end_date (from the sent day, at most 60 days).
CREATE OR REPLACE VIEW datahub.broadcast_report_history AS
SELECT
    date,
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
    report::JSON AS report,   -- further fields the service returned
    connection
FROM {{ source('datahub', 'broadcast_reports') }};
