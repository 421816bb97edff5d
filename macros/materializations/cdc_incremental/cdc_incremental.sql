{#- Silver current-state tables from a bronze change log, on Hudi.

    The model's SQL is the table's current state (cdc_current_state over all of
    bronze). This materialization decides once, at run time, how to build the table,
    and evaluates the model with its stage swapped for the batch of that build
    (cdc_model_batch_sql, cdc_stages: the latest event per key among bronze commits
    after the table's watermark, deletes, resets and rejected events included).

    With hard deletes (the default) the model's relation is a view over its state
    table `<model>__cdc_state`: one Hudi table holding the latest event of every key,
    a deleted key as a row flagged `_cdc_deleted` with its values nulled, so that a
    late, older event never resurrects it; the view leaves those rows out
    (docs/decisions/silver-one-state-table.md). The view reads the state table's base
    files and the recent table the builds since its last compaction wrote
    (read_path.sql), each build published to readers in one step. With
    cdc_deletes='soft' the relation is the table itself, deleted rows flagged in it.
      first build / --full-refresh -> full_refresh.sql (rebuild from all of bronze)
      otherwise                    -> resets.sql (a new truncate or re-snapshot deletes
                                      what it supersedes), then merge.sql (one Hudi
                                      upsert: the newer event of each key wins) or,
                                      with cdc_deletes='soft', merge_soft_deletes.sql
    then keeps the events it could not apply in `<model>__cdc_rejected` (rejected.sql)
    and records the resets and the bronze watermark on the stored table. Incremental
    and full-refresh builds give the same table.

    dbt-spark's `incremental` accepts only its own strategies, so this is a
    materialization of its own. -#}
{% materialization cdc_incremental, adapter='spark' %}
    {%- set primary_key = cdc_validate_config() -%}
    {%- set soft = cdc_delete_mode() == 'soft' -%}
    {%- set target_relation = this.incorporate(type='table' if soft else 'view') -%}
    {#- the Hudi table the build writes: the state table, or silver itself with soft deletes -#}
    {%- set stored_relation = target_relation.incorporate(type='table') if soft
        else cdc_state_relation(target_relation) -%}
    {#- before anything is read: another process's build of this model may change it -#}
    {%- do cdc_lock_build(target_relation) -%}
    {%- set existing_relation = load_relation(this) -%}
    {#- a hard-delete model's view names what it reads (read_path.sql); read once -#}
    {%- set view_properties = cdc_table_properties(existing_relation)
        if existing_relation is not none and existing_relation.is_view else {} -%}
    {%- set full_refresh = existing_relation is none or should_full_refresh()
        or cdc_validate_state(existing_relation, stored_relation, view_properties) -%}

    {#- Read once per build: none of the steps below changes cdc.* before cdc_finish_build. -#}
    {%- set properties = {} if full_refresh else cdc_table_properties(stored_relation) -%}
    {%- set watermark = cdc_checked_watermark(stored_relation, properties.get('cdc.watermark')) -%}

    {{ run_hooks(pre_hooks) }}

    {#- Nothing committed to bronze since the last build: leave the table as it is
        (var cdc_publish: build anyway, publishing rows written to the state table by
        hand: read_path.sql). -#}
    {%- if not full_refresh and not var('cdc_publish', false) and cdc_bronze_unchanged_since(watermark) -%}
        {{ return(cdc_end_build(target_relation, 'no new bronze commits',
            cdc_built_relations(target_relation, stored_relation), wrote=false)) }}
    {%- endif -%}

    {#- The batch, evaluated once: every later step reads the same rows even while
        ingestion commits to bronze. -#}
    {#- Resets are found over the window only, merged with the groups earlier builds
        kept, so a build does not scan all of bronze (cdc_resets). -#}
    {%- set stored_groups = cdc_stored_reset_groups(stored_relation, properties.get('cdc.reset_groups')) -%}
    {%- set batch_sql = cdc_model_batch_sql(sql, cdc_stages(cdc_source_relation(), watermark, stored_groups)) -%}
    {%- set batch = cdc_create_work_table(target_relation, 'batch', batch_sql) -%}
    {%- set resets, reset_groups = cdc_batch_resets(batch, with_groups=true) -%}
    {#- the newest _cdc_order the state table holds (cdc_merge) -#}
    {%- set max_order = none -%}
    {%- if full_refresh -%}
        {%- set result = cdc_full_refresh(target_relation, stored_relation, existing_relation, batch, primary_key) -%}
        {%- if not soft -%}
            {%- set max_order = run_query("select max(_cdc_order) from " ~ batch
                ~ " where _cdc_row = 'change'").columns[0].values()[0] -%}
        {%- endif -%}
    {%- else -%}
        {#- a new truncate or re-snapshot removes what it supersedes before the merge -#}
        {%- do cdc_ensure_upsert_properties(stored_relation, properties) -%}
        {%- do cdc_compaction_for_concurrent_builds() -%}
        {#- hard deletes: the view's generations (read_path.sql), written before the state
            table and published in one step after it -#}
        {%- set read_path = none if soft
            else cdc_read_path_state(target_relation, stored_relation, view_properties) -%}
        {%- if not soft -%}
            {%- do cdc_write_unpublished(target_relation, stored_relation, primary_key, read_path) -%}
        {%- endif -%}
        {%- set reset = cdc_apply_resets(target_relation, stored_relation, resets, properties.get('cdc.resets'),
            primary_key, read_path) -%}
        {%- if soft -%}
            {%- set result = cdc_merge_soft_deletes(stored_relation, batch, primary_key) -%}
        {%- else -%}
            {%- set result, max_order = cdc_merge(target_relation, stored_relation, batch, primary_key,
                properties.get('cdc.max_order'), read_path) -%}
            {%- do cdc_publish_build(target_relation, stored_relation, primary_key, read_path,
                (config.get('hudi_options') or {}).get('hoodie.compact.inline.max.delta.commits', 5) | int) -%}
        {%- endif -%}
        {%- set result = result ~ (' reset' if reset else '') -%}
    {%- endif -%}
    {%- do cdc_finish_build(target_relation, stored_relation, batch, primary_key, full_refresh, resets,
        properties.get('cdc.resets'), reset_groups, properties.get('cdc.reset_groups'),
        {} if max_order is none else {'cdc.max_order': max_order}) -%}

    {{ return(cdc_end_build(target_relation, result, cdc_built_relations(target_relation, stored_relation))) }}
{% endmaterialization %}
