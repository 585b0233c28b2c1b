-- One row per run of a pulled stream, whatever started it (pipelines/run_history.py): when
-- it ran, what started it, the days it was for, what it landed and what the service
-- answered. The newest run of a stream: ORDER BY started_at DESC.
CREATE OR REPLACE VIEW sync.runs AS
SELECT
    run_id,
    relation,                           -- <service>.<stream>
    started_by,                         -- schedule <name>, sensor <name>, backfill <id>, automation, command line, UI or API
    started_at,
    ended_at,
    first_day,                          -- a daily stream's range; null for a snapshot
    last_day,
    rows,
    requests,
    throttled,                          -- answers 429
    retries,
    budget_wait_seconds,                -- waiting for the key's rate budget
    outcome,                            -- succeeded, partly failed, failed
    error,
    connections                         -- each connection's part: connection, outcome (landed, failed), rows, error
FROM {{ source('sync', 'runs') }};
