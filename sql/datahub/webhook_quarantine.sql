-- Webhook events the receiver accepted (answered 200, so the hub will not resend them) that
-- cannot be rows of webhook_events: their `data` is no JSON the views can read (a lone
-- surrogate, for one). Kept with why, and `body`, the raw bytes the signature covered, to
-- read by hand. `date` is the UTC day of `timestamp`; every other event of that day is in
-- webhook_events.
CREATE OR REPLACE VIEW datahub.webhook_quarantine AS
SELECT
    date,
    timestamp,
    event,
    source,
    event_id,
    reason,
    body,              -- BLOB
    idempotency_key,   -- Service-Idempotency-Key, one per event
    received_at
FROM {{ source('datahub', 'webhook_quarantine') }};
