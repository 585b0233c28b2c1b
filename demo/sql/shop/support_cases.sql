-- The shop's customer service: a case per order that failed (its payment voided), `open` or
-- `resolved` (with `resolved_at`).
CREATE OR REPLACE VIEW shop.support_cases AS SELECT * FROM {{ source('shop', 'support_cases') }};
