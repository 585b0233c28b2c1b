-- Every activity (comment automation) of each workspace, with its stats totals.
CREATE OR REPLACE VIEW comment.activities AS
SELECT
    connection,                         -- connection (workspace) the row came from: default, …
    id,
    name,                               -- internal name
    status,                             -- draft, active, paused
    account_id,
    platform,                           -- instagram, facebook, threads
    trigger,                            -- ig_comment, ig_story, ig_live, fb_comment, fb_live,
                                        -- fb_message, threads_reply
    keywords,                           -- case-insensitive; empty: every comment triggers
    match,                              -- contains, exact
    public_replies,                     -- one is picked at random per reply
    dm,                                 -- JSON text: the DM's blocks (text, button, image, card)
    post_scope,                         -- all, selected (only post_ids), next_post
    post_ids,                           -- scope selected; story ids for ig_story
    follow_gate,                        -- JSON text; null: no gate
    start_at,
    end_at,                             -- after start_at
    created_at,
    updated_at,
    dashboard_url,
    public_replies_sent,                -- total, from the activity's stats
    dms_sent,                           -- total, from the activity's stats
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('comment', 'activities') }};
