-- Membership tier records to send to the data hub, one row per version; the columns are the fields
-- of the hub's membership tier record (pipelines/push/validation/commerce.py lists them). Per key
-- (`source_platform_customer_id` and `tier_id`) the push sends the newest version, and only when it
-- is newer than what the hub already accepted. An optional `connection` column names the data hub
-- connection to send to (default: default).
CREATE OR REPLACE VIEW outbound.membership_tiers AS
SELECT
    membership_tiers.timestamp,             -- when this state took effect: the newest wins
    membership_tiers.source_platform_name,
    membership_tiers.source_store_type,
    membership_tiers.source_store_id,
    membership_tiers.source_platform_customer_id,
    membership_tiers.source_store_name,
    customers.channel_type,                 -- the contact on the hub, where the shop knows it
    customers.external_channel_id,
    customers.external_member_id,
    membership_tiers.tier_id,
    membership_tiers.tier_name,
    membership_tiers.tier_status,
    membership_tiers.tier_description,
    membership_tiers.tier_source_status,
    membership_tiers.tier_effective_from,
    membership_tiers.tier_expiry_at,
    membership_tiers.currency,
    membership_tiers.lifetime_spend_amount,
    membership_tiers.lifetime_spend_updated_at,
    membership_tiers.tier_spend_amount
FROM shop.membership_tiers
LEFT JOIN shop.customers ON customers.customer_id = membership_tiers.source_platform_customer_id;
