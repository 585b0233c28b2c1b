CREATE OR REPLACE VIEW comment.activities AS
SELECT * FROM {{ source('comment', 'activities') }};
