-- Rows that were not sent, with the field and the rule: failed validation, a conflict (same
-- key and timestamp, different content), or refused by the service. Replaced at each push;
-- `first_seen` says since when a row has been failing.
CREATE OR REPLACE VIEW sync.rejected AS
SELECT * FROM {{ source('sync', 'rejected') }};
