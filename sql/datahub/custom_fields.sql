-- Custom field definitions of each region, archived ones included (active = false).
CREATE OR REPLACE VIEW datahub.custom_fields AS
SELECT
    id,
    name,
    key,              -- profile updates address it as cl_custom_<key>
    type,             -- text, number, date, datetime, single_select
    description,
    slot_number,
    active,
    options,          -- single_select only, else NULL; one row each in datahub.custom_field_options
    connection,
    _extra::JSON AS _extra  -- what the service sent beyond these columns (pipelines/drift.py)
FROM {{ source('datahub', 'custom_fields') }};
