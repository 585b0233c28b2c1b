-- Coupons issued to customers, one row per version (status change), by `timestamp`.
CREATE OR REPLACE VIEW shop.coupons AS SELECT * FROM {{ source('shop', 'coupons') }};
