{#- Strategy: rebuild the gold table from every live silver row as of `plan.end`, the
    model's SQL over them. The relation there before (a table of this or another
    materialization, or a view) is dropped first. -#}
{% macro hudi_incremental_full_refresh(target_relation, existing_relation, sql, state, columns, unique_key, plan) %}
    {%- if existing_relation is not none and existing_relation.is_view -%}
        {%- do adapter.drop_relation(existing_relation) -%}
    {%- endif -%}
    {%- for relation in [target_relation, cdc_work_relation(target_relation, 'window', 'hudi'),
            cdc_work_relation(target_relation, 'changes', 'hudi')] -%}
        {%- do cdc_drop_table(relation) -%}
    {%- endfor -%}
    {%- set rows_sql = hudi_incremental_snapshot_sql(state, columns, plan.end.completed) -%}
    {%- call statement('hudi_incremental_create') -%}
        create table {{ target_relation }}
        using hudi
        {{ hudi_incremental_tblproperties(unique_key) }}
        as {{ hudi_incremental_model_sql(sql, rows_sql) }}
    {%- endcall -%}
    {%- do hudi_incremental_record(target_relation, state, plan) -%}
    {{ return('full refresh' ~ (': ' ~ plan.reason if plan.reason is not none else '')) }}
{% endmacro %}


{#- Strategy: the window. The rows silver's commits in `plan.window` wrote, as silver
    holds them at `plan.end` (hudi_incremental_snapshot_sql), go once into a work table;
    its live rows go through the model's SQL into another. One Hudi MERGE then upserts
    the model's rows and deletes the window's other keys (deleted in silver, or left out
    by the model now): one commit, so a reader never sees half a window. Returns the
    counts for dbt's log line. A model whose columns no longer match the table's
    rebuilds it instead. -#}
{% macro hudi_incremental_apply(target_relation, existing_relation, sql, state, columns, unique_key, plan) %}
    {%- set window = cdc_create_work_table(target_relation, 'window', hudi_incremental_snapshot_sql(
        state, columns, plan.end.completed, plan.window | map(attribute='instant') | list), 'hudi') -%}
    {%- set changes = cdc_create_work_table(target_relation, 'changes', hudi_incremental_model_sql(sql,
        'select `' ~ columns | join('`, `') ~ '` from ' ~ window ~ ' where not _cdc_deleted'), 'hudi') -%}
    {%- set model_columns = hudi_incremental_columns(changes) -%}
    {%- set names = model_columns | map(attribute='name') | list -%}
    {%- set reason = hudi_incremental_column_change(model_columns, hudi_incremental_columns(existing_relation)) -%}
    {%- if reason is not none -%}
        {{ log("WARNING " ~ model.name ~ ": rebuilding " ~ existing_relation ~ " from all of silver: " ~ reason ~ ".",
            info=true) }}
        {%- do plan.update({'reason': reason}) -%}
        {{ return(hudi_incremental_full_refresh(target_relation, existing_relation, sql, state, columns, unique_key,
            plan)) }}
    {%- endif -%}
    {%- set keys = '`' ~ unique_key | join('`, `') ~ '`' -%}
    {%- set removed_sql -%}
        select {{ keys }} from {{ window }}
        except
        select {{ keys }} from {{ changes }}
    {%- endset -%}
    {%- set counts = run_query('select (select count(*) from ' ~ window ~ '), (select count(*) from ' ~ changes
        ~ '), (select count(*) from (select ' ~ keys ~ ' from ' ~ changes ~ ' group by ' ~ keys
        ~ ' having count(*) > 1)), (select count(*) from (' ~ removed_sql ~ '))').rows[0] -%}
    {%- if counts[2] > 0 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ " returns " ~ counts[2] ~ " " ~ unique_key | join(', ') ~ " value(s) more than "
            ~ "once; a hudi_incremental model keeps one row per key of the silver model it reads: derive and "
            ~ "filter its rows, do not join or explode them.") }}
    {%- endif -%}
    {%- if counts[0] > 0 -%}
        {%- call statement('hudi_incremental_merge') -%}
            merge into {{ target_relation }} as target
            using (
                select `{{ names | join('`, `') }}`, false as _hudi_incremental_removed
                from {{ changes }}
                union all
                select
                    {%- for column in model_columns %}
                    {%- if column.name in unique_key %}
                    `{{ column.name }}`,
                    {%- else %}
                    cast(null as {{ column.dtype }}),
                    {%- endif %}
                    {%- endfor %}
                    true
                from ({{ removed_sql }})
            ) as source
            on {{ hudi_incremental_key_join('target', 'source', unique_key) }}
            {#- Hudi evaluates a MERGE's update clauses before its delete clause: the conditions exclude each other. #}
            when matched and source._hudi_incremental_removed then delete
            when matched and not source._hudi_incremental_removed then update set
                {%- for name in names %}
                target.`{{ name }}` = source.`{{ name }}`{{ "," if not loop.last }}
                {%- endfor %}
            when not matched and not source._hudi_incremental_removed then insert (`{{ names | join('`, `') }}`)
                values (source.`{{ names | join('`, source.`') }}`)
        {%- endcall -%}
    {%- endif -%}
    {%- do hudi_incremental_record(target_relation, state, plan) -%}
    {%- do cdc_drop_table(window) -%}
    {%- do cdc_drop_table(changes) -%}
    {{ return('incremental: ' ~ plan.window | length ~ ' silver commit(s) after ' ~ plan.begin.instant ~ ' to '
        ~ plan.end.instant ~ ', window ' ~ counts[0] ~ ' rows: ' ~ counts[1] ~ ' upserted, ' ~ counts[3]
        ~ ' removed') }}
{% endmacro %}


{#- A table's columns (dbt Column objects), Hudi's meta columns left out. -#}
{% macro hudi_incremental_columns(relation) %}
    {%- set columns = [] -%}
    {%- for column in adapter.get_columns_in_relation(relation) if not column.name.startswith('_hoodie_') -%}
        {%- do columns.append(column) -%}
    {%- endfor -%}
    {{ return(columns) }}
{% endmacro %}


{#- Why the model's rows (`columns`) no longer fit the stored table's (`stored`), or none:
    a column added, dropped, renamed or retyped in the model. A merge would leave the
    rows the window does not touch as they were, unlike a rebuild. -#}
{% macro hudi_incremental_column_change(columns, stored) %}
    {%- set wanted, have = [], [] -%}
    {%- for column in columns -%}
        {%- do wanted.append(column.name | lower ~ ' ' ~ column.dtype | lower | replace(' ', '')) -%}
    {%- endfor -%}
    {%- for column in stored -%}
        {%- do have.append(column.name | lower ~ ' ' ~ column.dtype | lower | replace(' ', '')) -%}
    {%- endfor -%}
    {%- if wanted != have -%}
        {{ return("the model's columns (" ~ wanted | join(', ') ~ ") are not the table's (" ~ have | join(', ')
            ~ ")") }}
    {%- endif -%}
    {{ return(none) }}
{% endmacro %}

