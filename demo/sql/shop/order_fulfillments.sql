-- Shipping of web orders, one row per version (label, in transit, delivered...).
CREATE OR REPLACE VIEW shop.order_fulfillments AS SELECT * FROM {{ source('shop', 'order_fulfillments') }};
