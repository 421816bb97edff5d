{#- Gold tables kept up to date from the silver commits they have not read yet.

    The model selects from one silver model through hudi_incremental_source(ref(...)),
    which on its own (`dbt show`, `dbt compile`, a dbt unit test) is that silver view:
    the model's SQL is the table's full current result. Row by row (derived columns,
    a filter), never joined or aggregated: each gold row comes from one silver row and
    keeps its key (`unique_key`, the silver model's primary key).

    The gold table is a Hudi table, copy-on-write or merge-on-read (the `table_type`
    config, else the var `cdc_gold_table_type`). A build reads silver's state table
    `<silver model>__cdc_state` (docs/decisions/silver-one-state-table.md) as of the
    newest silver commit when the build began, fixed before anything else runs so that
    a silver commit made meanwhile is read by the next build:
      first build / --full-refresh / hudi_incremental_rebuild_reason
          -> hudi_incremental_full_refresh: the model over every live silver row
      otherwise
          -> hudi_incremental_apply: the window (the rows silver's commits after the one
             the table consumed last wrote, deleted keys included) through the model;
             one Hudi MERGE upserts its rows and deletes the window's other keys
    then records the silver commit it consumed in the table's properties
    (`hudi_incremental.*`), last. Why the window is read from a snapshot and not by
    Hudi's incremental query: docs/decisions/gold-incremental-query.md. -#}
{% materialization hudi_incremental, adapter='spark' %}
    {%- set unique_key = hudi_incremental_validate_config() -%}
    {%- set source = hudi_incremental_source_relation(sql) -%}
    {%- set state = hudi_incremental_state_relation(source, unique_key) -%}
    {%- set target_relation = this.incorporate(type='table') -%}
    {%- do cdc_lock_build(target_relation) -%}
    {%- set existing_relation = load_relation(this) -%}

    {#- Silver's timeline, read once: its newest commit now ends this build's window. -#}
    {%- set timeline = hudi_incremental_timeline(state) -%}
    {%- set plan = hudi_incremental_plan(existing_relation, state, timeline, sql) -%}

    {{ run_hooks(pre_hooks) }}

    {%- if not plan.full_refresh and plan.window | length == 0 -%}
        {{ return(cdc_end_build(target_relation, 'no new silver commits', [target_relation], wrote=false)) }}
    {%- endif -%}

    {%- set columns = hudi_incremental_source_columns(source) -%}
    {%- if plan.full_refresh -%}
        {%- set result = hudi_incremental_full_refresh(target_relation, existing_relation, sql, state,
            columns, unique_key, plan) -%}
    {%- else -%}
        {%- do cdc_compaction_for_concurrent_builds() -%}
        {%- set result = hudi_incremental_apply(target_relation, existing_relation, sql, state, columns,
            unique_key, plan) -%}
    {%- endif -%}

    {{ return(cdc_end_build(target_relation, result, [target_relation])) }}
{% endmaterialization %}
