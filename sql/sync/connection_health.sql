-- Each connection of each pulled stream, from every run of it (sync.runs): when a run last
-- landed it and what, when one last failed on it and why. `failing` is true when its last
-- failure came after its last landing: it has not landed since. Connections failing now:
-- WHERE failing. The Dagster asset's table of its connections is this view too, over the
-- runs it carries (pipelines/warehouse/health.py), so the two decide alike.
CREATE OR REPLACE VIEW sync.connection_health AS
WITH parts AS (
    SELECT relation, ended_at, part.connection, part.outcome, part.rows, part.error
    FROM {{ source('sync', 'runs') }}, unnest(connections) AS each_part(part)
)
SELECT
    relation,                           -- <service>.<stream>
    connection,
    max(ended_at) FILTER (WHERE outcome = 'landed') AS last_landed_at,
    arg_max(rows, ended_at) FILTER (WHERE outcome = 'landed') AS last_landed_rows,
    max(ended_at) FILTER (WHERE outcome = 'failed') AS last_failed_at,
    arg_max(error, ended_at) FILTER (WHERE outcome = 'failed') AS last_error,  -- with what to do
    coalesce(
        max(ended_at) FILTER (WHERE outcome = 'failed')
            > max(ended_at) FILTER (WHERE outcome = 'landed'),
        max(ended_at) FILTER (WHERE outcome = 'landed') IS NULL
    ) AS failing,
    count(*) AS runs
FROM parts
GROUP BY relation, connection;
