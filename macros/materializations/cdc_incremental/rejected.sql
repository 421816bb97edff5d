{#- Events a silver build cannot apply (a value that does not decode to its column's
    type, a null key) are kept in `<model>__cdc_rejected`, keyed by their ordering key:
    the reason, the key as far as it decoded, and the bronze coordinates (topic,
    partition, offset, sink file and line). They are left out of silver, so a later
    valid event of the same key applies normally. The generic test
    `cdc_no_rejected_events` fails `dbt build` while the table is not empty. -#}
{% macro cdc_rejected_relation(target_relation) %}
    {{ return(target_relation.incorporate(path={'identifier': target_relation.identifier ~ '__cdc_rejected'})) }}
{% endmacro %}


{% macro cdc_rejected_columns(primary_key) %}
    {{ return(primary_key + ['_cdc_order', '_cdc_op', '_cdc_rejection', '_cdc_topic', '_cdc_partition', '_cdc_offset',
        '_cdc_source_file', '_cdc_source_line', '_cdc_commit_time']) }}
{% endmacro %}


{% macro cdc_record_rejected(target_relation, batch, primary_key, full_refresh) %}
    {%- set relation = cdc_rejected_relation(target_relation) -%}
    {%- set columns = cdc_rejected_columns(primary_key) -%}
    {%- set rejected_sql = 'select `' ~ columns | join('`, `') ~ '` from ' ~ batch ~ " where _cdc_row = 'rejected'" -%}
    {#- one query: the first three rejected events to log, each with how many there are -#}
    {%- set samples = run_query('select _cdc_rejection, _cdc_source_file, _cdc_source_line, _cdc_offset, '
        ~ 'count(*) over () from ' ~ batch ~ " where _cdc_row = 'rejected' order by _cdc_order limit 3") -%}
    {%- if full_refresh or load_relation(relation) is none -%}
        {%- call statement('cdc_drop_rejected') -%}
            drop table if exists {{ relation }} purge
        {%- endcall -%}
        {%- do cdc_create_hudi_table_as(relation, ['_cdc_order'], rejected_sql, batch) -%}
    {%- elif samples.rows | length > 0 -%}
        {%- call statement('cdc_merge_rejected') -%}
            merge into {{ relation }} as stored
            using ({{ rejected_sql }}) as rejected
            on stored._cdc_order = rejected._cdc_order
            when not matched then insert (`{{ columns | join('`, `') }}`)
                values (rejected.`{{ columns | join('`, rejected.`') }}`)
        {%- endcall -%}
    {%- endif -%}
    {%- for row in samples -%}
        {%- if loop.first -%}
            {{ log("WARNING " ~ model.name ~ ": rejected " ~ row[4] ~ " event(s) of this build, kept in "
                ~ relation ~ "; the first:", info=true) }}
        {%- endif -%}
        {{ log("WARNING " ~ model.name ~ ": rejected the event at " ~ row[1] ~ " line " ~ row[2] ~ " (offset "
            ~ row[3] ~ "): " ~ row[0] ~ ".", info=true) }}
    {%- endfor -%}
{% endmacro %}
