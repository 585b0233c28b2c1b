-- Behavior events to send to the data hub (its "Submit behavior event" operation). `event_key`
-- is the brand's unique id of the event: the push sends each event once per key. `params` is a
-- JSON object (text or a struct) whose fields depend on `behavior`: `PARAMS_BY_BEHAVIOR` in
-- pipelines/push/validation/behavior.py lists them (names beyond page_view's: sandbox/README.md). An
-- optional `connection` column names the data hub connection to send to (default: default).
CREATE OR REPLACE VIEW outbound.behavior_events AS
SELECT
    event_key,
    behavior,           -- page_view, view_item, add_to_cart, remove_from_cart, begin_checkout,
                        -- purchase, user_engagement
    utm_campaign,
    utm_source,
    utm_medium,
    utm_content,
    utm_term,           -- required
    language,
    geography,
    params
FROM shop.behavior_events;
