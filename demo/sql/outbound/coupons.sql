-- Coupon records to send to the data hub, one row per version; the columns are the fields of the
-- hub's coupon record (`CouponRecord` in pipelines/push/validation/commerce.py). Per key (`id`) the push
-- sends the newest version, and only when it is newer than what the hub already accepted. An
-- optional `connection` column names the data hub connection to send to (default: default).
CREATE OR REPLACE VIEW outbound.coupons AS
SELECT
    coupons.timestamp,                      -- when this state took effect: the newest wins
    coupons.source_platform_name,
    coupons.source_store_type,
    coupons.source_store_id,
    coupons.source_platform_customer_id,
    coupons.source_store_name,
    customers.channel_type,                 -- the contact on the hub, where the shop knows it
    customers.external_channel_id,
    customers.external_member_id,
    coupons.id,
    coupons.name,
    coupons.url,                            -- absolute http(s)
    coupons.code,
    coupons.is_redeemable,
    coupons.status,
    coupons.description,
    coupons.source_status,
    coupons.valid_from,
    coupons.valid_to,
    coupons.applicable_store_ids,
    coupons.applicable_item_ids,
    coupons.applicable_item_category_ids,
    coupons.discount_type,
    coupons.source_discount_type,
    coupons.discount_value
FROM shop.coupons
LEFT JOIN shop.customers ON customers.customer_id = coupons.source_platform_customer_id;
