-- Member profiles as of each connection's latest export; NULL where the export had an empty
-- value. Every export is kept: marts.member_profile_history shows what changed.
CREATE OR REPLACE VIEW datahub.members AS
SELECT
    date,             -- the day of the export
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
    connection,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('datahub', 'members') }}
QUALIFY date = max(date) OVER (PARTITION BY connection);
