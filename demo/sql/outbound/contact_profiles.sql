-- Profile updates to send to the data hub (its "Update channel contact profile" operation),
-- one row per contact. The hub finds the contact by channel_type, external_channel_id and
-- external_member_id; the other columns are profile fields (null clears one) and custom fields
-- as cl_custom_<key> (keys and types: datahub.custom_fields; a single_select takes the option
-- key, never its name). The push sends only the fields that changed since the contact's last
-- accepted update. An optional `connection` column names the data hub connection to send to
-- (default: default).
-- Here: the latest change the shop holds for each contact of the hub's default region.
CREATE OR REPLACE VIEW outbound.contact_profiles AS
WITH latest AS (
    SELECT *
    FROM shop.contact_changes
    QUALIFY row_number() OVER (PARTITION BY customer_id ORDER BY changed_at DESC) = 1
)
SELECT
    members.channel_type,
    customers.external_channel_id,      -- the shop's: the member export lacks it
    members.external_member_id,
    latest.member_level,
    latest.city,
    latest.birthday,
    latest.gender,                      -- male, female, unknown, other
    latest.display_mobile,              -- E.164
    latest.nickname AS cl_custom_nickname,                  -- text
    latest.loyalty_points AS cl_custom_loyalty_points,      -- number
    latest.anniversary AS cl_custom_anniversary,            -- date
    latest.last_store_visit AS cl_custom_last_store_visit,  -- datetime
    latest.preferred_store AS cl_custom_preferred_store,    -- single_select (option key)
    latest.skin_type AS cl_custom_skin_type                 -- single_select (option key)
FROM latest
JOIN shop.customers ON customers.customer_id = latest.customer_id
JOIN datahub.members ON members.customer_id = latest.customer_id
    AND members.connection = 'default';
