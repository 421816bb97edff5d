{#- Silver history tables (SCD type 2) from a bronze change log, on Hudi: one row per
    version of a key, keyed by the primary key and the version's first event
    (`_cdc_order`), with `_cdc_valid_from` / `_cdc_valid_to` / `_cdc_is_current`.

    The model's SQL is the table's contents (cdc_history_versions over all of bronze).
    This materialization evaluates it with its stage swapped for the batch of the build
    (cdc_model_batch_sql, cdc_history_stages: every version of the keys that have
    events in bronze commits newer than the table's watermark, recomputed from all
    their events) and applies it:
      first build / --full-refresh / a new truncate or complete snapshot
                      -> rebuild from all of bronze
      otherwise       -> merge: versions that are new or changed (a later event closed
                         them, a late event split them) are upserted, versions of those
                         keys the recomputation no longer has (a late event merged them
                         into an earlier one) are deleted; one Hudi commit
    then keeps rejected events in `<model>__cdc_rejected` and records the resets and the
    watermark on the table, like cdc_incremental. -#}
{% materialization cdc_history, adapter='spark' %}
    {%- set primary_key = cdc_validate_config() -%}
    {%- set record_key = primary_key + ['_cdc_order'] -%}
    {%- set target_relation = this.incorporate(type='table') -%}
    {%- do cdc_lock_build(target_relation) -%}
    {%- set existing_relation = load_relation(this) -%}
    {%- set state = namespace(full_refresh=existing_relation is none or should_full_refresh()) -%}
    {%- if not state.full_refresh -%}
        {%- set reason = cdc_rebuild_reason(existing_relation) -%}
        {%- if reason is not none -%}
            {{ log("WARNING " ~ model.name ~ ": rebuilding " ~ existing_relation ~ " from all of bronze: " ~ reason
                ~ ".", info=true) }}
            {%- set state.full_refresh = true -%}
        {%- endif -%}
    {%- endif -%}

    {%- set properties = {} if state.full_refresh else cdc_table_properties(target_relation) -%}
    {%- set watermark = cdc_checked_watermark(target_relation, properties.get('cdc.watermark')) -%}

    {{ run_hooks(pre_hooks) }}

    {%- if not state.full_refresh and cdc_bronze_unchanged_since(watermark) -%}
        {{ return(cdc_end_build(target_relation, 'no new bronze commits', [target_relation], wrote=false)) }}
    {%- endif -%}

    {%- set batch_sql = cdc_model_batch_sql(sql, cdc_history_stages(cdc_source_relation(),
        none if state.full_refresh else watermark, properties.get('cdc.resets'))) -%}
    {%- set batch = cdc_create_work_table(target_relation, 'batch', batch_sql) -%}
    {%- set resets = cdc_batch_resets(batch) -%}
    {#- a new truncate or complete snapshot changes which events count: the window was
        all of bronze (cdc_history_window), rebuild -#}
    {%- if not state.full_refresh
            and tojson(resets, sort_keys=true) != properties.get('cdc.resets') -%}
        {%- set state.full_refresh = true -%}
    {%- endif -%}
    {%- if state.full_refresh -%}
        {%- set result = cdc_history_full_refresh(target_relation, batch, record_key) -%}
    {%- else -%}
        {%- set result = cdc_history_merge(target_relation, batch, primary_key) -%}
    {%- endif -%}
    {%- do cdc_finish_build(target_relation, target_relation, batch, primary_key, state.full_refresh, resets,
        properties.get('cdc.resets')) -%}

    {{ return(cdc_end_build(target_relation, result, [target_relation])) }}
{% endmaterialization %}


{#- Columns of a history table: the model's row columns, then the version's validity
    and the CDC metadata of its first event. -#}
{% macro cdc_history_columns() %}
    {{ return(cdc_model_columns() | map(attribute='name') | list + cdc_history_metadata_columns()) }}
{% endmacro %}


{#- A version's validity and the CDC metadata of its first event. -#}
{% macro cdc_history_metadata_columns() %}
    {{ return(['_cdc_valid_from', '_cdc_valid_to', '_cdc_is_current', '_cdc_op', '_cdc_order',
        '_cdc_valid_to_order', '_cdc_commit_time']) }}
{% endmacro %}


{% macro cdc_history_full_refresh(target_relation, batch, record_key) %}
    {%- call statement('cdc_drop_history') -%}
        drop table if exists {{ target_relation }} purge
    {%- endcall -%}
    {%- set history_sql = cdc_history_rows(batch, cdc_model_columns() | map(attribute='name') | list) -%}
    {%- do cdc_create_hudi_table_as(target_relation, record_key, history_sql, batch) -%}
    {{ return('full refresh') }}
{% endmacro %}


{% macro cdc_history_merge(target_relation, batch, primary_key) %}
    {%- set columns = cdc_history_columns() -%}
    {%- set version_key = cdc_key_join('version', 'stored', primary_key) ~ ' and version._cdc_order = stored._cdc_order' -%}
    {%- set actions_sql -%}
        select
            {%- for name in columns %}
            version.`{{ name }}`,
            {%- endfor %}
            'upsert' as _cdc_action
        from {{ batch }} as version
        left join {{ target_relation }} as stored
            on {{ version_key }}
        where version._cdc_row = 'version'
            and not (
                struct(version.`{{ columns | join('`, version.`') }}`)
                <=> struct(stored.`{{ columns | join('`, stored.`') }}`)
            )

        union all

        -- versions of a recomputed key that no longer exist
        select
            {%- for name in columns %}
            stored.`{{ name }}`,
            {%- endfor %}
            'delete' as _cdc_action
        from {{ target_relation }} as stored
        left semi join (select * from {{ batch }} where _cdc_row = 'version') as recomputed
            on {{ cdc_key_join('recomputed', 'stored', primary_key) }}
        left anti join (select * from {{ batch }} where _cdc_row = 'version') as version
            on {{ version_key }}
    {%- endset -%}
    {%- set actions = cdc_create_work_table(target_relation, 'actions', actions_sql) -%}
    {%- set counts = {'upsert': 0, 'delete': 0} -%}
    {%- for row in run_query('select _cdc_action, count(*) from ' ~ actions ~ ' group by 1') -%}
        {%- do counts.update({row[0]: row[1]}) -%}
    {%- endfor -%}

    {%- if counts['upsert'] + counts['delete'] > 0 -%}
        {%- call statement('cdc_merge_history') -%}
            merge into {{ target_relation }} as stored
            using {{ actions }} as version
            on {{ cdc_key_join('stored', 'version', primary_key) }} and stored._cdc_order = version._cdc_order
            when matched and version._cdc_action = 'delete' then delete
            when matched and version._cdc_action = 'upsert' then update set
                {%- for name in columns %}
                `{{ name }}` = version.`{{ name }}`{{ "," if not loop.last }}
                {%- endfor %}
            when not matched and version._cdc_action = 'upsert' then insert
                (`{{ columns | join('`, `') }}`)
                values (version.`{{ columns | join('`, version.`') }}`)
        {%- endcall -%}
    {%- endif -%}
    {%- do cdc_drop_table(actions) -%}
    {{ return('versions=' ~ counts['upsert'] ~ ' retired=' ~ counts['delete']) }}
{% endmacro %}
