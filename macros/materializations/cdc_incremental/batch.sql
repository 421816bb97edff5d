{#- The batch a build applies: the model's SQL with its current-state stage (between
    cdc_stage_begin and cdc_stage_end) swapped for `stages_sql`, the same stages over
    the build's window with deletes, resets and rejected events kept (cdc_stages,
    cdc_history_stages). Whatever the model adds around the stage (derived columns)
    applies to the batch as it does to the current state. -#}
{% macro cdc_model_batch_sql(sql, stages_sql) %}
    {%- set begin, end = cdc_stage_begin(), cdc_stage_end() -%}
    {%- set head = sql.split(begin) -%}
    {%- set tail = (head[1] if head | length == 2 else '').split(end) -%}
    {%- if head | length != 2 or tail | length != 2 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": its SQL must call cdc_current_state(source(...)) (current-state tables) "
            ~ "or cdc_history_versions(source(...)) (history tables) exactly once, e.g. "
            ~ "`with current_state as ({{ cdc_current_state(source('bronze', '<table>')) }}) "
            ~ "select * from current_state`; found it " ~ (head | length - 1) ~ " time(s).") }}
    {%- endif -%}
    {{ return(head[0] ~ 'select * from (' ~ stages_sql ~ ') as cdc_batch' ~ tail[1]) }}
{% endmacro %}


{#- The bronze change log a silver model reads: its one source. -#}
{% macro cdc_source_relation() %}
    {%- set sources = cdc_source_nodes() -%}
    {%- if sources | length != 1 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ " reads " ~ sources | length ~ " sources; a silver model reads exactly one "
            ~ "bronze change log, through cdc_current_state(source('bronze', '<table>')). Join tables in a "
            ~ "gold model.") }}
    {%- endif -%}
    {{ return(api.Relation.create(
        database=sources[0].database, schema=sources[0].schema, identifier=sources[0].identifier)) }}
{% endmacro %}
