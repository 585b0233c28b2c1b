-- Activity performance by UTC day: what each comment automation did, from its trigger logs.
-- One row per connection (workspace), activity and day with at least one trigger.
CREATE OR REPLACE VIEW marts.activity_performance AS
SELECT
    logs.connection,
    logs.date,
    logs.activity_id,
    coalesce(activities.name, any_value(logs.activity_name)) AS activity_name,
    activities.status AS activity_status,
    activities.platform,
    activities.trigger,
    count(*) AS triggers,
    count(*) FILTER (WHERE logs.status = 'success' AND logs.action = 'public_reply')
        AS public_replies_sent,
    count(*) FILTER (WHERE logs.status = 'success' AND logs.action = 'dm') AS dms_sent,
    count(*) FILTER (WHERE logs.status = 'failed') AS failed,
    round(count(*) FILTER (WHERE logs.status = 'failed') / count(*), 4) AS failure_rate
FROM comment.trigger_logs AS logs
LEFT JOIN comment.activities AS activities
    ON activities.connection = logs.connection AND activities.id = logs.activity_id
GROUP BY logs.connection, logs.date, logs.activity_id, activities.name, activities.status,
    activities.platform, activities.trigger;
