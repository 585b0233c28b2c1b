CREATE OR REPLACE VIEW comment.workspace AS
SELECT * FROM {{ source('comment', 'workspace') }};
