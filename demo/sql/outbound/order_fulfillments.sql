-- Order fulfillment records to send to the data hub, one row per version; the columns are the
-- fields of the hub's order fulfillment record (pipelines/push/validation/commerce.py lists them). Per key
-- (`order_id`) the push sends the newest version, and only when it is newer than what the hub
-- already accepted. An optional `connection` column names the data hub connection to send to
-- (default: default).
CREATE OR REPLACE VIEW outbound.order_fulfillments AS
SELECT
    order_fulfillments.timestamp,           -- when this state took effect: the newest wins
    order_fulfillments.source_platform_name,
    order_fulfillments.source_store_type,
    order_fulfillments.source_store_id,
    order_fulfillments.source_platform_customer_id,
    order_fulfillments.source_store_name,
    customers.channel_type,                 -- the contact on the hub, where the shop knows it
    customers.external_channel_id,
    customers.external_member_id,
    order_fulfillments.order_id,
    order_fulfillments.fulfillment_status,
    order_fulfillments.shipping_location,
    order_fulfillments.shipping_status,
    order_fulfillments.fulfillment_source_status,
    order_fulfillments.shipping_source_status,
    order_fulfillments.delivery_method,
    order_fulfillments.shipping_address,
    order_fulfillments.shipping_carrier,
    order_fulfillments.shipping_tracking_id,
    order_fulfillments.shipping_tracking_url,
    order_fulfillments.estimated_delivery_date,
    order_fulfillments.pickup_store_id,
    order_fulfillments.pickup_store_name,
    order_fulfillments.shipped_at,
    order_fulfillments.delivered_at
FROM shop.order_fulfillments
LEFT JOIN shop.customers ON customers.customer_id = order_fulfillments.source_platform_customer_id;
