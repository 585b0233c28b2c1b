-- Orders, one row per version (created, confirmed, completed...), by `timestamp`; `items`
-- holds the order lines.
CREATE OR REPLACE VIEW shop.orders AS SELECT * FROM {{ source('shop', 'orders') }};
