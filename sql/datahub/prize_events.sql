-- prize.send, prize.claim and prize.redeem webhook events; claim and redeem carry `code`.
CREATE OR REPLACE VIEW datahub.prize_events AS
SELECT
    date,
    timestamp,
    event,
    split_part(event, '.', 2) AS action,   -- send, claim, redeem
    source,
    TRY_CAST(data ->> 'campaign_id' AS BIGINT) AS campaign_id,
    data ->> 'campaign_type' AS campaign_type,
    data ->> 'campaign_name' AS campaign_name,
    data ->> 'customer_id' AS customer_id,
    data ->> 'line_uid' AS line_uid,
    data ->> 'code' AS code,
    idempotency_key,
    received_at
FROM (SELECT * REPLACE (data::JSON AS data) FROM {{ source('datahub', 'webhook_events') }})
WHERE event IN ('prize.send', 'prize.claim', 'prize.redeem');
