-- Member profiles as of the latest export; NULL where the export had an empty value.
CREATE OR REPLACE VIEW datahub.members AS
SELECT
    member_id,
    customer_id,
    connect_id,
    full_name,
    display_name,
    display_email,
    display_mobile,   -- E.164
    gender,
    birthday,         -- YYYY-MM-DD
    region,
    city,
    address,
    company,
    member_level,
    source,           -- maac or caac
    line_uid,
    channel_type,
    external_member_id,
    account_manager,
    connection
FROM {{ source('datahub', 'members') }};
