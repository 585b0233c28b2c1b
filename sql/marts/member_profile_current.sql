-- The current profile of every data hub member (latest export per connection).
CREATE OR REPLACE VIEW marts.member_profile_current AS
SELECT
    connection,
    member_id,
    customer_id,
    coalesce(display_name, full_name) AS name,
    display_email,
    display_mobile,
    gender,
    TRY_CAST(birthday AS DATE) AS birthday,
    region,
    city,
    company,
    member_level,
    source,
    channel_type,
    account_manager,
    date AS profile_as_of
FROM datahub.members;
