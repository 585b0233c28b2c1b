-- message.send, message.open and message.click webhook events. The hub leaves the click's
-- further field undocumented; the project reads it as `url` (the sandbox's choice).
-- Fields of an unexpected type read as NULL; webhook_events keeps the raw `data`.
CREATE OR REPLACE VIEW datahub.message_events AS
SELECT
    date,
    timestamp,
    event,
    split_part(event, '.', 2) AS action,   -- send, open, click
    source,
    TRY_CAST(data ->> 'campaign_id' AS BIGINT) AS campaign_id,
    data ->> 'campaign_type' AS campaign_type,
    data ->> 'campaign_name' AS campaign_name,
    data ->> 'customer_id' AS customer_id,
    data ->> 'line_uid' AS line_uid,
    data ->> 'url' AS url,                  -- clicks only
    idempotency_key,
    received_at
FROM (SELECT * REPLACE (data::JSON AS data) FROM {{ source('datahub', 'webhook_events') }})
WHERE event IN ('message.send', 'message.open', 'message.click');
