CREATE OR REPLACE VIEW comment.daily_stats AS
SELECT * FROM {{ source('comment', 'daily_stats') }};
