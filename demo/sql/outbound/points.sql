-- Point records to send to the data hub, one row per version; the columns are the fields of the
-- hub's point record (`PointRecord` in pipelines/push/validation/commerce.py). Per key
-- (`source_platform_customer_id` and `type`) the push sends the newest version, and only when it is
-- newer than what the hub already accepted. An optional `connection` column names the data hub
-- connection to send to (default: default).
CREATE OR REPLACE VIEW outbound.points AS
SELECT
    points.timestamp,                       -- when this state took effect: the newest wins
    points.source_platform_name,
    points.source_store_type,
    points.source_store_id,
    points.source_platform_customer_id,
    points.source_store_name,
    customers.channel_type,                 -- the contact on the hub, where the shop knows it
    customers.external_channel_id,
    customers.external_member_id,
    points.balance,
    points.type,
    points.currency,
    points.expiry_at
FROM shop.points
LEFT JOIN shop.customers ON customers.customer_id = points.source_platform_customer_id;
