-- Recent posts and stories of each account, read live from its platform.
CREATE OR REPLACE VIEW comment.posts AS
SELECT
    connection,                         -- connection (workspace) the row came from: default, …
    account_id,                         -- the account listed
    kind,                               -- posts, story: which of its lists
    id,
    caption,
    media_type,
    timestamp,
    permalink,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('comment', 'posts') }};
