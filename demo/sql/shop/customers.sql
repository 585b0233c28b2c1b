-- The shop's customers: hub members it knows (with their channel identity) and customers
-- the hub has never seen.
CREATE OR REPLACE VIEW shop.customers AS SELECT * FROM {{ source('shop', 'customers') }};
