-- contact.tag.add and contact.tag.remove webhook events. An add is sent even when the
-- contact already had the tag, so adds are not a count of newly tagged contacts.
CREATE OR REPLACE VIEW datahub.tag_events AS
SELECT
    date,
    timestamp,
    event,
    split_part(event, '.', 3) AS action,   -- add, remove
    source,
    TRY_CAST(data ->> 'tag_id' AS BIGINT) AS tag_id,
    data ->> 'tag_name' AS tag_name,
    data ->> 'customer_id' AS customer_id,
    data ->> 'line_uid' AS line_uid,
    data ->> 'external_member_id' AS external_member_id,
    data ->> 'channel_type' AS channel_type,
    TRY_CAST(data ->> 'campaign_id' AS BIGINT) AS campaign_id,   -- adds only, nullable
    data ->> 'campaign_type' AS campaign_type,
    data ->> 'campaign_name' AS campaign_name,
    idempotency_key,
    received_at
FROM (SELECT * REPLACE (data::JSON AS data) FROM {{ source('datahub', 'webhook_events') }})
WHERE event IN ('contact.tag.add', 'contact.tag.remove');
