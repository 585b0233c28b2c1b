-- sms_plus.status.update webhook events (source maac only): the delivery state of an SMS+
-- message, a LINE notification by phone number (PNP) with SMS as its fallback. The hub
-- documents no value lists for the status fields; they are kept as sent.
CREATE OR REPLACE VIEW datahub.sms_status AS
SELECT
    date,
    timestamp,
    source,
    TRY_CAST(data ->> 'event_id' AS BIGINT) AS event_id,   -- the SMS+ event's own id
    data ->> 'status' AS status,
    data ->> 'sms_status' AS sms_status,
    data ->> 'line_push_status' AS line_push_status,
    data ->> 'pnp_status' AS pnp_status,
    TRY_CAST(data ->> 'sms_delivered_at' AS TIMESTAMPTZ) AS sms_delivered_at,
    TRY_CAST(data ->> 'line_push_delivered_at' AS TIMESTAMPTZ) AS line_push_delivered_at,
    TRY_CAST(data ->> 'pnp_delivered_at' AS TIMESTAMPTZ) AS pnp_delivered_at,
    TRY_CAST(data ->> 'pnp_setting_id' AS BIGINT) AS pnp_setting_id,
    data ->> 'pnp_setting_name' AS pnp_setting_name,
    TRY_CAST(data ->> 'pnp_message_id' AS BIGINT) AS pnp_message_id,
    data ->> 'phone_number' AS phone_number,
    data ->> 'line_push_template_id' AS line_push_template_id,
    data ->> 'line_push_error_category' AS line_push_error_category,
    data ->> 'sms_error_category' AS sms_error_category,
    idempotency_key,
    received_at
FROM (SELECT * REPLACE (data::JSON AS data) FROM {{ source('datahub', 'webhook_events') }})
WHERE event = 'sms_plus.status.update';
