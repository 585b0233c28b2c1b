-- Reservation records to send to the data hub, one row per version; the columns are the fields of
-- the hub's reservation record (pipelines/push/validation/commerce.py lists them). Per key
-- (`source_platform_customer_id` and `id`) the push sends the newest version, and only when it is
-- newer than what the hub already accepted. An optional `connection` column names the data hub
-- connection to send to (default: default).
CREATE OR REPLACE VIEW outbound.reservations AS
SELECT
    reservations.timestamp,                 -- when this state took effect: the newest wins
    reservations.source_platform_name,
    reservations.source_store_type,
    reservations.source_store_id,
    reservations.source_platform_customer_id,
    reservations.source_store_name,
    customers.channel_type,                 -- the contact on the hub, where the shop knows it
    customers.external_channel_id,
    customers.external_member_id,
    reservations.id,
    reservations.status,
    reservations.start_at,
    reservations.end_at,                    -- required, like start_at
    reservations.description,
    reservations.service_type,
    reservations.service_id,
    reservations.service_name,
    reservations.source_status,
    reservations.address,
    reservations.staff_id,
    reservations.staff_name
FROM shop.reservations
LEFT JOIN shop.customers ON customers.customer_id = reservations.source_platform_customer_id;
