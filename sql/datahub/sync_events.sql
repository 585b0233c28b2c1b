-- The synchronization webhook events (`*.sync`): one per accepted commerce record submission,
-- `event_id` the id the submission was answered with. One column per `data` field the hub
-- documents for any of them, NULL where a record type does not carry it; `items` (orders)
-- stays JSON.
CREATE OR REPLACE VIEW datahub.sync_events AS
SELECT
    date,
    timestamp,
    event,
    split_part(event, '.', 1) AS record_type,   -- coupon, order, order_fulfillment, membership, point, reservation
    event_id,
    source,
    data ->> 'source_platform_name' AS source_platform_name,
    data ->> 'source_platform_customer_id' AS source_platform_customer_id,
    data ->> 'source_store_type' AS source_store_type,
    data ->> 'source_store_id' AS source_store_id,
    data ->> 'id' AS id,                        -- coupon, order, reservation
    data ->> 'status' AS status,                -- coupon, order, reservation
    -- coupon
    data ->> 'name' AS name,
    data ->> 'code' AS code,
    TRY_CAST(data ->> 'is_redeemable' AS BOOLEAN) AS is_redeemable,
    data ->> 'discount_type' AS discount_type,
    TRY_CAST(data ->> 'discount_value' AS DOUBLE) AS discount_value,
    -- order
    TRY_CAST(data ->> 'total_amount' AS DOUBLE) AS total_amount,
    data ->> 'currency' AS currency,            -- also membership, point
    data -> 'items' AS items,
    data ->> 'payment_method' AS payment_method,
    data ->> 'delivery_method' AS delivery_method,
    data ->> 'shipping_location' AS shipping_location,   -- also order_fulfillment
    -- order_fulfillment
    data ->> 'order_id' AS order_id,
    data ->> 'fulfillment_status' AS fulfillment_status,
    data ->> 'shipping_status' AS shipping_status,
    TRY_CAST(data ->> 'estimated_delivery_date' AS DATE) AS estimated_delivery_date,
    data ->> 'pickup_store_id' AS pickup_store_id,
    -- membership
    data ->> 'tier_id' AS tier_id,
    data ->> 'tier_name' AS tier_name,
    data ->> 'tier_status' AS tier_status,
    TRY_CAST(data ->> 'tier_effective_from' AS TIMESTAMPTZ) AS tier_effective_from,
    TRY_CAST(data ->> 'tier_expiry_at' AS TIMESTAMPTZ) AS tier_expiry_at,
    TRY_CAST(data ->> 'lifetime_spend_amount' AS DOUBLE) AS lifetime_spend_amount,
    -- point
    TRY_CAST(data ->> 'balance' AS DOUBLE) AS balance,
    data ->> 'type' AS "type",
    TRY_CAST(data ->> 'expiry_at' AS TIMESTAMPTZ) AS expiry_at,
    -- reservation
    TRY_CAST(data ->> 'start_at' AS TIMESTAMPTZ) AS start_at,
    TRY_CAST(data ->> 'end_at' AS TIMESTAMPTZ) AS end_at,
    data ->> 'description' AS description,
    data ->> 'service_type' AS service_type,
    data ->> 'service_id' AS service_id,
    data ->> 'service_name' AS service_name,
    data ->> 'address' AS address,
    data ->> 'staff_id' AS staff_id,
    data ->> 'staff_name' AS staff_name,
    idempotency_key,
    received_at
FROM (SELECT * REPLACE (data::JSON AS data) FROM {{ source('datahub', 'webhook_events') }})
WHERE event LIKE '%.sync';
