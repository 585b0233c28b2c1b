-- Every change `python -m cli activities apply` made to a comment automation
-- activity (pipelines/activities/): one row per change, with the activity before and after
-- as JSON, what the file declared, the drift it put back and who applied it. The newest
-- change of an activity: ORDER BY applied_at DESC.
CREATE OR REPLACE VIEW sync.activity_changes AS
SELECT
    apply_id,
    applied_at,
    applied_by,                         -- --by, the Dagster run's, or the OS user
    connection,
    name,                               -- the activity's identity in the folder
    activity_id,
    action,                             -- create, update, pause, activate, delete
    fields,                             -- JSON array of the fields written
    before,                             -- JSON; null for a create
    after,                              -- JSON; null for a delete
    wanted,                             -- JSON: what the file declared; null for a delete
    drift,                              -- JSON array of fields changed at the service; null when none
    file
FROM {{ source('sync', 'activity_changes') }};
