CREATE OR REPLACE VIEW comment.posts AS
SELECT * FROM {{ source('comment', 'posts') }};
