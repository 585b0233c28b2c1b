-- Loyalty point and store credit balances per customer, one row per change.
CREATE OR REPLACE VIEW shop.points AS SELECT * FROM {{ source('shop', 'points') }};
