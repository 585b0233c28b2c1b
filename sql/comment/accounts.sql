CREATE OR REPLACE VIEW comment.accounts AS
SELECT * FROM {{ source('comment', 'accounts') }};
