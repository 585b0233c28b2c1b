-- Store appointments, one row per version (scheduled, confirmed, completed...).
CREATE OR REPLACE VIEW shop.reservations AS SELECT * FROM {{ source('shop', 'reservations') }};
