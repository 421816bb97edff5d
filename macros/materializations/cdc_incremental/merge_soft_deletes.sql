{#- Strategy (cdc_deletes='soft'): a deleted row stays in silver with `_cdc_is_deleted`
    and `_cdc_deleted_at`, keeping its last values. Each stored row holds two things
    that only move forward: its latest event (op, order, deletion flag) and the latest
    live event its values come from (`_cdc_values_order`). A batch row replaces each one
    it is newer than, so late and replayed events are harmless and the result equals a
    full refresh. Deleted keys are the rows themselves: no tombstone table. Silver takes
    the changed rows in one Hudi upsert (cdc_upsert_properties, without deletes). A row
    whose values alone are newer keeps the stored `_cdc_order`: Hudi's event-time
    merge lets an incoming row with an equal ordering value replace the stored one. -#}
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
        {%- call statement('cdc_upsert_silver') -%}
            insert into {{ target_relation }}
                ({% for name in silver_columns %}`{{ name }}`{{ ", " if not loop.last }}{% endfor %})
            select {% for name in silver_columns %}`{{ name }}`{{ ", " if not loop.last }}{% endfor %}
            from {{ changes }}
        {%- endcall -%}
    {%- endif -%}

    {%- do cdc_drop_table(changes) -%}
    {{ return('changed=' ~ count) }}
{% endmacro %}
