{#- Strategy: rebuild silver and its tombstones from the whole change log (soft deletes:
    deleted keys stay in silver, flagged, and there is no tombstone table). -#}
{% macro cdc_full_refresh(target_relation, tombstone_relation, batch, primary_key) %}
    {%- for relation in [target_relation, tombstone_relation] -%}
        {%- call statement('cdc_drop_' ~ loop.index) -%}
            drop table if exists {{ relation }} purge
        {%- endcall -%}
    {%- endfor -%}
    {%- set soft = cdc_delete_mode() == 'soft' -%}
    {%- set silver_sql = cdc_current_rows(batch, cdc_model_columns() | map(attribute='name') | list) -%}
    {%- do cdc_create_hudi_table_as(target_relation, primary_key, silver_sql, batch) -%}
    {%- if soft -%}
        {{ return('full refresh') }}
    {%- endif -%}
    {%- set tombstones_sql -%}
        select {{ cdc_tombstone_columns(primary_key, 'batch') }}
        from {{ batch }} as batch
        where _cdc_deleted and _cdc_row = 'change'
    {%- endset -%}
    {%- do cdc_create_hudi_table_as(tombstone_relation, primary_key, tombstones_sql, batch) -%}
    {{ return('full refresh') }}
{% endmacro %}


{% macro cdc_tombstone_columns(primary_key, alias) -%}
    {%- for key in primary_key %}{{ alias }}.`{{ key }}`, {% endfor -%}
    {{ alias }}._cdc_order, {{ alias }}._cdc_source_ts as _cdc_deleted_at, {{ alias }}._cdc_commit_time
{%- endmacro %}
