-- The broadcast funnel: sent, opened, clicked, with rates, from each broadcast's latest
-- report snapshot (figures over its first 60 days, the service's limit).
CREATE OR REPLACE VIEW marts.broadcast_funnel AS
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
    reports.date AS figures_as_of
FROM datahub.broadcast_reports AS reports
LEFT JOIN datahub.broadcasts AS broadcasts
    ON broadcasts.connection = reports.connection AND broadcasts.id = reports.broadcast_id;
