{#- Strategy: rebuild from the whole change log. Hard deletes: the state table (every
    key's latest event, deleted keys flagged and their values nulled) and the read path
    over it, whose view leaves them out (read_path.sql); soft deletes: the table itself, deleted keys flagged with
    their last values. `existing_relation`: the model's relation before the build (a
    view, or a table of an earlier layout: it and its tombstone table are dropped). -#}
{% macro cdc_full_refresh(target_relation, stored_relation, existing_relation, batch, primary_key) %}
    {%- if existing_relation is not none -%}
        {%- do adapter.drop_relation(existing_relation) -%}
    {%- endif -%}
    {%- if cdc_delete_mode() != 'soft' -%}
        {%- do cdc_drop_read_path(target_relation, stored_relation) -%}
    {%- endif -%}
    {%- set dropped = [stored_relation] + ([] if cdc_delete_mode() == 'soft'
        else [cdc_tombstone_relation(target_relation)]) -%}
    {%- for relation in dropped -%}
        {%- call statement('cdc_drop_' ~ loop.index) -%}
            drop table if exists {{ relation }} purge
        {%- endcall -%}
    {%- endfor -%}
    {%- set columns = cdc_model_columns() | map(attribute='name') | list -%}
    {%- set partition_by = cdc_partition_by() -%}
    {%- if cdc_delete_mode() == 'soft' -%}
        {%- do cdc_create_hudi_table_as(stored_relation, primary_key, cdc_current_rows(batch, columns), batch,
            cdc_partition_options(partition_by), partition_by) -%}
        {{ return('full refresh') }}
    {%- endif -%}
    {%- set state_sql -%}
        select {{ cdc_state_values(columns, primary_key, 'batch') }}
        from {{ batch }} as batch
        where _cdc_row = 'change'
    {%- endset -%}
    {%- do cdc_create_hudi_table_as(stored_relation, primary_key, state_sql, batch,
        cdc_state_table_options(partition_by), partition_by) -%}
    {%- do cdc_create_read_path(target_relation, stored_relation, primary_key) -%}
    {{ return('full refresh') }}
{% endmacro %}


{#- The state table's columns: the model's row columns, the CDC metadata, `_cdc_deleted`. -#}
{% macro cdc_state_columns() %}
    {{ return(cdc_model_columns() | map(attribute='name') | list + cdc_metadata_columns() + ['_cdc_deleted']) }}
{% endmacro %}


{#- A state table row from a batch row (alias `alias`): the row columns `columns`
    (a deleted key's nulled, but its primary key), the CDC metadata, `_cdc_deleted`. -#}
{% macro cdc_state_values(columns, primary_key, alias) -%}
    {%- for name in columns %}
    {%- if name in primary_key %}
    {{ alias }}.`{{ name }}`,
    {%- else %}
    case when not {{ alias }}._cdc_deleted then {{ alias }}.`{{ name }}` end as `{{ name }}`,
    {%- endif %}
    {%- endfor %}
    {%- for name in cdc_metadata_columns() %}
    {{ alias }}.{{ name }},
    {%- endfor %}
    {{ alias }}._cdc_deleted
{%- endmacro %}


{#- The state table's Hudi layout (docs/decisions/silver-one-state-table.md), under
    the model's `hudi_options`; partitioned (`partition_by`, a list of columns), the
    global index of cdc_partition_options instead of the bucket index, which finds a
    key only within its partition (docs/decisions/silver-partitioned-global-index.md). -#}
{% macro cdc_state_table_options(partition_by=[]) %}
    {%- set options = {'type': 'mor'} -%}
    {%- if partition_by -%}
        {%- do options.update(cdc_partition_options(partition_by)) -%}
    {%- else -%}
        {%- do options.update({
            'hoodie.index.type': 'BUCKET',
            'hoodie.index.bucket.engine': 'SIMPLE',
            'hoodie.bucket.index.num.buckets': 4,
        }) -%}
    {%- endif -%}
    {%- do options.update({
        'hoodie.compact.inline': 'true',
        'hoodie.compact.inline.max.delta.commits': 5,
    }) -%}
    {{ return(options) }}
{% endmacro %}
