-- Web analytics events; `event_key` is the tracker's id, `params` a JSON object.
CREATE OR REPLACE VIEW shop.behavior_events AS SELECT * FROM {{ source('shop', 'behavior_events') }};
