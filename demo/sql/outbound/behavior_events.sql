-- Behavior events to send to the data hub (customer-data-hub-api.md section 4, "Behavior event
-- body"). `event_key` is the brand's unique id of the event: the push sends each event once per
-- key. `params` is a JSON object (text or a struct) whose fields depend on `behavior`; see the
-- spec and the hub's parameter names. An optional `connection` column names the data hub
-- connection to send to (default: default).
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
