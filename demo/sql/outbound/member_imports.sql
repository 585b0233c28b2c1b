-- Members to import into the data hub (its "Import members" operation): the shop's customers
-- the hub's default region does not have yet. `import_key` names the attribute that matches a
-- row to a contact (line_uid, display_email, display_mobile, connect_id or customer_id); a row
-- that matches none creates a contact, and fields sent as null are cleared. An optional
-- `connection` column names the data hub connection to send to (default: default).
CREATE OR REPLACE VIEW outbound.member_imports AS
SELECT
    'customer_id' AS import_key,
    customers.line_uid,
    customers.customer_id,
    CAST(NULL AS VARCHAR) AS connect_id,    -- the shop has none
    customers.full_name,
    customers.display_name,
    customers.display_email,
    customers.display_mobile,               -- E.164
    customers.gender,                       -- male, female, unknown, other
    customers.birthday,
    customers.region,
    customers.city,
    customers.address,
    CAST(NULL AS VARCHAR) AS company,       -- the shop has none
    CAST(NULL AS VARCHAR) AS member_level   -- a new contact starts without one
FROM shop.customers
WHERE NOT EXISTS (
    SELECT 1
    FROM datahub.members
    WHERE members.connection = 'default' AND members.customer_id = customers.customer_id
);
