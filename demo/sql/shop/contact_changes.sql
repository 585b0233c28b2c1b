-- What the brand knows of hub contacts (tier, city, custom fields), one row per change.
CREATE OR REPLACE VIEW shop.contact_changes AS SELECT * FROM {{ source('shop', 'contact_changes') }};
