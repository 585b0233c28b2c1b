-- The broadcast funnel: sent, opened, clicked, with rates, from each broadcast's latest
-- report snapshot (figures over its first 60 days, the service's limit), and beside them
-- the detail only the webhook message events carry: distinct people who opened and
-- clicked, and the link clicked most. Events name no region, so they join on the id.
CREATE OR REPLACE VIEW marts.broadcast_funnel AS
WITH events AS (
    SELECT
        campaign_id,
        count(*) FILTER (WHERE action = 'send') AS sends_received,
        count(DISTINCT coalesce(customer_id, line_uid)) FILTER (WHERE action = 'open')
            AS people_opened,
        count(DISTINCT coalesce(customer_id, line_uid)) FILTER (WHERE action = 'click')
            AS people_clicked,
        mode(url) FILTER (WHERE action = 'click') AS top_clicked_url
    FROM datahub.message_events
    WHERE campaign_type = 'broadcast'
    GROUP BY campaign_id
)
SELECT
    reports.connection,
    reports.broadcast_id,
    coalesce(broadcasts.name, reports.name) AS broadcast_name,
    reports.source,
    broadcasts.status,
    reports.sent_date,
    reports.segment_name,
    reports.sent,
    reports.open_count AS opened,
    reports.clicks AS clicked,
    round(reports.open_count / nullif(reports.sent, 0), 4) AS open_rate,
    round(reports.clicks / nullif(reports.open_count, 0), 4) AS click_to_open_rate,
    reports.date AS figures_as_of,
    coalesce(events.sends_received, 0) AS webhook_sends_received,
    coalesce(events.people_opened, 0) AS people_opened,
    coalesce(events.people_clicked, 0) AS people_clicked,
    events.top_clicked_url
FROM datahub.broadcast_reports AS reports
LEFT JOIN datahub.broadcasts AS broadcasts
    ON broadcasts.connection = reports.connection AND broadcasts.id = reports.broadcast_id
LEFT JOIN events ON events.campaign_id = reports.broadcast_id;
