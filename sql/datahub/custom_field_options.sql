-- The options of single_select custom fields, one row per option.
CREATE OR REPLACE VIEW datahub.custom_field_options AS
SELECT
    field.id AS custom_field_id,
    field.key AS custom_field_key,
    o.option.id AS id,
    o.option.key AS key,      -- the value a profile update sends (never the name)
    o.option.name AS name,
    o.option.description AS description,
    o.option.position AS position,
    o.option.active AS active,
    field.connection
FROM {{ source('datahub', 'custom_fields') }} AS field, unnest(field.options) AS o(option);
