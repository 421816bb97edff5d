{#- Checks made before anything runs; each error says how to fix it. Returns the
    primary key as a list. -#}
{% macro cdc_validate_config() %}
    {%- set primary_key = cdc_primary_key() -%}
    {%- set file_format = config.get('file_format') -%}
    {%- if file_format != 'hudi' -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": materialized='cdc_incremental' needs file_format='hudi' (got '"
            ~ file_format ~ "'). Set `+file_format: hudi` for the silver folder in dbt_project.yml.") }}
    {%- endif -%}
    {%- if config.get('partition_by') -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": cdc_incremental does not support partition_by yet "
            ~ "(a key whose partition value changes would be kept twice). Remove partition_by.") }}
    {%- endif -%}
    {%- set column_names = cdc_model_columns() | map(attribute='name') | list -%}
    {%- for key in primary_key if key not in column_names -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": unique_key column '" ~ key ~ "' is not among its columns "
            ~ column_names | join(', ') ~ ". Add it to the model's YAML.") }}
    {%- endfor -%}
    {#- The ingestion checks keys from the bronze source's meta.primary_key: both must agree. -#}
    {%- for node_id in model.depends_on.nodes if node_id.startswith('source.') -%}
        {%- set declared = (graph.sources[node_id].meta or {}).get('primary_key') -%}
        {%- if declared is not none and (declared | list) != primary_key -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": unique_key " ~ primary_key ~ " differs from meta.primary_key "
                ~ declared ~ " of its source " ~ graph.sources[node_id].name ~ ". Make them the same.") }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(primary_key) }}
{% endmacro %}


{#- An incremental build needs the tombstones and the watermark of an earlier build. -#}
{% macro cdc_validate_state(existing_relation, tombstone_relation) %}
    {%- if load_relation(tombstone_relation) is none -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": " ~ existing_relation ~ " exists but its tombstone table "
            ~ tombstone_relation ~ " does not (a table not built by cdc_incremental, or a build that "
            ~ "stopped half way). Rebuild it: dbt build --full-refresh --select " ~ model.name) }}
    {%- endif -%}
{% endmacro %}
