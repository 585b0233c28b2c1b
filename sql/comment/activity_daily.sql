CREATE OR REPLACE VIEW comment.activity_daily AS
SELECT * FROM {{ source('comment', 'activity_daily') }};
