-- Loyalty club tiers per customer, one row per version (active, expired, grace period...).
CREATE OR REPLACE VIEW shop.membership_tiers AS SELECT * FROM {{ source('shop', 'membership_tiers') }};
