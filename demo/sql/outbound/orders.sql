-- Order records to send to the data hub, one row per version; the columns are the fields of the
-- hub's order record (`OrderRecord` in pipelines/push/validation/commerce.py). Per key (`id`) the push sends
-- the newest version, and only when it is newer than what the hub already accepted. An optional
-- `connection` column names the data hub connection to send to (default: default).
CREATE OR REPLACE VIEW outbound.orders AS
SELECT
    orders.timestamp,                       -- when this state took effect: the newest wins
    orders.source_platform_name,
    orders.source_store_type,
    orders.source_store_id,
    orders.source_platform_customer_id,
    orders.source_store_name,
    customers.channel_type,                 -- the contact on the hub, where the shop knows it
    customers.external_channel_id,
    customers.external_member_id,
    orders.id,
    orders.status,
    orders.total_amount,
    orders.currency,                        -- 3 letters, ISO 4217
    orders.items,                           -- [{id, name, price, count, category, variant, ...}]
    orders.payment_method,
    orders.delivery_method,
    orders.shipping_location,
    orders.source_status,
    orders.description,
    orders.store_description,
    orders.shipping_address,
    orders.subtotal_amount,
    orders.total_discount,
    orders.shipping_amount,
    orders.tax_amount,
    orders.paid_amount,
    orders.coupon_id,                       -- the coupon's id, not its code
    orders.promotion_name,
    orders.promotion_id,
    orders.payment_transaction_id,
    orders.payment_provider,
    orders.pickup_store_id,
    orders.pickup_store_name
FROM shop.orders
LEFT JOIN shop.customers ON customers.customer_id = orders.source_platform_customer_id;
