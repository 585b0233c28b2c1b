CREATE OR REPLACE VIEW comment.trigger_logs AS
SELECT * FROM {{ source('comment', 'trigger_logs') }};
