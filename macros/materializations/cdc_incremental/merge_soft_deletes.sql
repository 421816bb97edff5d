{#- Strategy (cdc_deletes='soft'): a deleted row stays in silver with `_cdc_is_deleted`
    and `_cdc_deleted_at`, keeping its last values. Each stored row holds two things
    that only move forward: its latest event (op, order, deletion flag) and the latest
    live event its values come from (`_cdc_values_order`). A batch row replaces each one
    it is newer than, so late and replayed events are harmless and the result equals a
    full refresh. Deleted keys are the rows themselves: no tombstone table. -#}
{% macro cdc_merge_soft_deletes(target_relation, batch, primary_key) %}
    {%- set columns = cdc_model_columns() -%}
    {%- set silver_columns = cdc_silver_columns() -%}

    {%- set newer_event = "batch._cdc_order > coalesce(stored._cdc_order, '')" -%}
    {%- set newer_values = "coalesce(batch._cdc_values_order > coalesce(stored._cdc_values_order, ''), false)" -%}

    {%- set changes_sql -%}
        select
            {%- for column in columns %}
            case
                when not {{ newer_values }} then stored.`{{ column.name }}`
                {%- if column.toastable %}
                when array_contains(batch._cdc_unavailable, '{{ column.name }}') then stored.`{{ column.name }}`
                {%- endif %}
                else batch.`{{ column.name }}`
            end as `{{ column.name }}`,
            {%- endfor %}
            {%- for name in ['_cdc_op', '_cdc_order', '_cdc_source_ts', '_cdc_commit_time'] %}
            case when {{ newer_event }} then batch.{{ name }} else stored.{{ name }} end as {{ name }},
            {%- endfor %}
            case when {{ newer_event }} then batch._cdc_deleted else stored._cdc_is_deleted end as _cdc_is_deleted,
            case
                when not {{ newer_event }} then stored._cdc_deleted_at
                when batch._cdc_deleted then batch._cdc_source_ts
            end as _cdc_deleted_at,
            case when {{ newer_values }} then batch._cdc_values_order else stored._cdc_values_order end
                as _cdc_values_order
        from {{ batch }} as batch
        left join {{ target_relation }} as stored
            on {{ cdc_key_join('batch', 'stored', primary_key) }}
        where batch._cdc_row = 'change' and ({{ newer_event }} or {{ newer_values }})
    {%- endset -%}
    {%- set changes = cdc_create_work_table(target_relation, 'actions', changes_sql) -%}
    {%- set count = run_query('select count(*) from ' ~ changes).columns[0].values()[0] -%}

    {%- if count > 0 -%}
        {%- call statement('cdc_merge_silver') -%}
            merge into {{ target_relation }} as stored
            using {{ changes }} as change
            on {{ cdc_key_join('stored', 'change', primary_key) }}
            when matched then update set
                {%- for name in silver_columns %}
                `{{ name }}` = change.`{{ name }}`{{ "," if not loop.last }}
                {%- endfor %}
            when not matched then insert
                ({% for name in silver_columns %}`{{ name }}`{{ ", " if not loop.last }}{% endfor %})
                values ({% for name in silver_columns %}change.`{{ name }}`{{ ", " if not loop.last }}{% endfor %})
        {%- endcall -%}
    {%- endif -%}

    {%- do cdc_drop_work_table(changes) -%}
    {{ return('changed=' ~ count) }}
{% endmacro %}
