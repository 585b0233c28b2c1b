-- contact.profile.<field>.update webhook events: one row per changed profile field, the
-- field named by the event and its new value as text (NULL when it was cleared, or when the
-- name is not letters, digits and underscores).
CREATE OR REPLACE VIEW datahub.profile_changes AS
SELECT
    date,
    timestamp,
    event,
    field,                                  -- customer_id, connect_id, full_name, …
    -- A name DuckDB would read as a JSON path ("$[", "*") fails the query for every row.
    CASE WHEN regexp_matches(field, '^[A-Za-z0-9_]+$') THEN data ->> field END AS value,
    source,
    data ->> 'customer_id' AS customer_id,
    data ->> 'external_member_id' AS external_member_id,
    data ->> 'channel_type' AS channel_type,
    data ->> 'line_uid' AS line_uid,        -- customer_id updates only
    idempotency_key,
    received_at
FROM (
    SELECT
        * REPLACE (data::JSON AS data),
        regexp_extract(event, '^contact\.profile\.(.+)\.update$', 1) AS field
    FROM {{ source('datahub', 'webhook_events') }}
    WHERE event LIKE 'contact.profile.%.update'
);
