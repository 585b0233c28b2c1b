-- Every webhook event the data hub delivered and the receiver accepted, once each (by the
-- delivery's idempotency key): the envelope, its raw `data`, and when it arrived. `date` is the
-- UTC day of `timestamp`. The per-family views beside this one type the fields of `data`.
CREATE OR REPLACE VIEW datahub.webhook_events AS
SELECT
    date,
    timestamp,
    event,
    source,            -- maac or caac
    event_id,          -- *.sync events: the id the submission was answered with
    data::JSON AS data,
    idempotency_key,   -- Service-Idempotency-Key, one per event
    received_at
FROM {{ source('datahub', 'webhook_events') }};
