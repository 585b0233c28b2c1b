-- The push ledger: every row the data hub accepted (and, for imports, every task started),
-- one row per key and attempt. The newest entry of a key is what the service holds.
CREATE OR REPLACE VIEW sync.pushed AS
SELECT * FROM {{ source('sync', 'pushed') }};
