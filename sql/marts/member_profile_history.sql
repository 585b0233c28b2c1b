-- What changed in each member's profile between two daily exports: one row per member,
-- export day and field whose value differs from the member's previous export.
CREATE OR REPLACE VIEW marts.member_profile_history AS
WITH exports AS (
    SELECT
        connection, date, member_id, customer_id, connect_id, full_name, display_name,
        display_email, display_mobile, gender, birthday, region, city, address, company,
        member_level, line_uid, channel_type, external_member_id, account_manager
    FROM {{ source('datahub', 'members') }}
),
fields AS (
    SELECT *
    FROM exports
    UNPIVOT INCLUDE NULLS (value FOR field IN (
        customer_id, connect_id, full_name, display_name, display_email, display_mobile,
        gender, birthday, region, city, address, company, member_level, line_uid,
        channel_type, external_member_id, account_manager
    ))
),
compared AS (
    SELECT
        *,
        lag(value) OVER w AS previous_value,
        lag(date) OVER w AS previous_date
    FROM fields
    WINDOW w AS (PARTITION BY connection, member_id, field ORDER BY date)
)
SELECT connection, member_id, date AS changed_on, field, previous_value, value AS new_value
FROM compared
WHERE previous_date IS NOT NULL AND value IS DISTINCT FROM previous_value;
