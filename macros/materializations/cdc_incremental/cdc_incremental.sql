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
    (read_path.sql). With cdc_deletes='soft' the relation
    is the table itself, deleted rows flagged in it.
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
    {%- set full_refresh = existing_relation is none or should_full_refresh()
        or cdc_validate_state(existing_relation, stored_relation) -%}

    {#- Read once per build: none of the steps below changes cdc.* before cdc_finish_build. -#}
    {%- set properties = {} if full_refresh else cdc_table_properties(stored_relation) -%}
    {%- set watermark = cdc_checked_watermark(stored_relation, properties.get('cdc.watermark')) -%}

    {{ run_hooks(pre_hooks) }}

    {#- Nothing committed to bronze since the last build: leave the table as it is. -#}
    {%- if not full_refresh and cdc_bronze_unchanged_since(watermark) -%}
        {%- call noop_statement('main', 'no new bronze commits', 'OK') -%}{%- endcall -%}
        {{ run_hooks(post_hooks) }}
        {%- do cdc_unlock_build(target_relation) -%}
        {{ return({'relations': cdc_built_relations(target_relation, stored_relation)}) }}
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
        {%- if not soft -%}
            {%- do cdc_trim_recent(target_relation, stored_relation) -%}
        {%- endif -%}
        {%- set reset = cdc_apply_resets(target_relation, stored_relation, resets, properties.get('cdc.resets'),
            primary_key) -%}
        {%- if soft -%}
            {%- set result = cdc_merge_soft_deletes(stored_relation, batch, primary_key) -%}
        {%- else -%}
            {%- set result, max_order = cdc_merge(target_relation, stored_relation, batch, primary_key,
                properties.get('cdc.max_order')) -%}
        {%- endif -%}
        {%- set result = result ~ (' reset' if reset else '') -%}
    {%- endif -%}
    {%- do cdc_finish_build(target_relation, stored_relation, batch, primary_key, full_refresh, resets,
        properties.get('cdc.resets'), reset_groups, properties.get('cdc.reset_groups'),
        {} if max_order is none else {'cdc.max_order': max_order}) -%}

    {%- call noop_statement('main', result, 'OK') -%}{%- endcall -%}

    {{ run_hooks(post_hooks) }}
    {%- do persist_docs(target_relation, model) -%}
    {%- do cdc_unlock_build(target_relation) -%}
    {{ return({'relations': cdc_built_relations(target_relation, stored_relation)}) }}
{% endmaterialization %}


{#- The relations a build returns to dbt, which adds them to its relation cache: the
    state table too, so that a model built later in the same invocation (a
    hudi_incremental gold model) finds it with load_relation. -#}
{% macro cdc_built_relations(target_relation, stored_relation) %}
    {{ return([target_relation] if stored_relation == target_relation else [target_relation, stored_relation]) }}
{% endmacro %}


{#- The last steps of a build (cdc_incremental, cdc_history) once its table is written:
    keep the rejected events (next to the model's relation `target_relation`), record
    the resets (`applied`: the stored table's cdc.resets when the build began, none after
    a full refresh; with `reset_groups`, the groups for the next build's cdc_resets, and
    `applied_groups` as stored) and the watermark on the stored table `stored_relation`,
    drop the batch. The watermark comes last: a build that stops before it reads its
    window again, and merging its groups again changes nothing (each figure is a max).
    `properties`: more table properties to set with the watermark. -#}
{% macro cdc_finish_build(target_relation, stored_relation, batch, primary_key, full_refresh, resets, applied,
        reset_groups=none, applied_groups=none, properties={}) %}
    {%- do cdc_record_rejected(target_relation, batch, primary_key, full_refresh) -%}
    {%- do cdc_write_resets(stored_relation, resets, none if full_refresh else applied, reset_groups,
        none if full_refresh else applied_groups) -%}
    {%- do cdc_write_watermark(stored_relation, batch, properties) -%}
    {%- do cdc_drop_table(batch) -%}
{% endmacro %}


{#- The state table behind a hard-delete model's view: the latest event of every key,
    deleted keys included (flagged `_cdc_deleted`). -#}
{% macro cdc_state_relation(target_relation) %}
    {{ return(target_relation.incorporate(type='table',
        path={'identifier': target_relation.identifier ~ '__cdc_state'})) }}
{% endmacro %}


{#- The tombstone table of the layout before the state table: dropped when a model is
    rebuilt. -#}
{% macro cdc_tombstone_relation(target_relation) %}
    {{ return(target_relation.incorporate(type='table',
        path={'identifier': target_relation.identifier ~ '__cdc_tombstones'})) }}
{% endmacro %}


{#- The CDC metadata every current-state table holds after its row columns: the
    operation, order, source time and bronze commit of the event its row comes from. -#}
{% macro cdc_metadata_columns() %}
    {{ return(['_cdc_op', '_cdc_order', '_cdc_source_ts', '_cdc_commit_time']) }}
{% endmacro %}


{#- Columns written to silver: the model's row columns, then CDC metadata (soft deletes:
    the deletion flag and time, and the order of the event the values come from). -#}
{% macro cdc_silver_columns() %}
    {%- set names = cdc_model_columns() | map(attribute='name') | list -%}
    {%- set names = names + cdc_metadata_columns() -%}
    {%- if cdc_delete_mode() == 'soft' -%}
        {%- set names = names + ['_cdc_is_deleted', '_cdc_deleted_at', '_cdc_values_order'] -%}
    {%- endif -%}
    {{ return(names) }}
{% endmacro %}


{#- Hudi table properties: copy-on-write (the state table: cdc_state_table_options),
    record key = primary key, ordering field = _cdc_order (without it Hudi keeps
    duplicates of a key), zstd parquet (faster and smaller than Hudi's default gzip),
    files of at most 16 MiB (a copy-on-write write rewrites each file group a change
    falls in as one task: with Hudi's 120 MiB a table under that is one file group,
    rewritten by one core), plus `hudi_options`.
    Measured by benchmarks/silver_index.py (docs/decisions/silver-index-codec-file-size.md).
    `cdc.declared_types` lists the columns stored wider than declared (cdc_storage_type)
    as name:declared type, for cdc_rebuild_reason. `table_options` (the state table's
    cdc_state_table_options) go over the defaults, `hudi_options` over both. -#}
{% macro cdc_hudi_tblproperties(primary_key, table_options={}) %}
    {%- set options = {
        'type': 'cow',
        'primaryKey': primary_key | join(','),
        'preCombineField': '_cdc_order',
    } -%}
    {%- do options.update(cdc_parquet_file_options()) -%}
    {%- set declared_types = [] -%}
    {%- for column in cdc_model_columns() if column.declared_type != column.data_type -%}
        {%- do declared_types.append(column.name | lower ~ ':' ~ column.declared_type) -%}
    {%- endfor -%}
    {%- if declared_types -%}
        {%- do options.update({'cdc.declared_types': declared_types | join(',')}) -%}
    {%- endif -%}
    {%- do options.update(table_options) -%}
    {%- do options.update(config.get('hudi_options') or {}) -%}
    {{ cdc_tblproperties_clause(options) }}
{% endmacro %}


{#- zstd parquet files of at most 16 MiB, Hudi tables' file settings here (silver's
    and gold's, cdc_hudi_tblproperties). -#}
{% macro cdc_parquet_file_options() %}
    {{ return({
        'hoodie.parquet.compression.codec': 'zstd',
        'hoodie.parquet.max.file.size': 16 * 1024 * 1024,
        'hoodie.parquet.small.file.limit': 12 * 1024 * 1024,
    }) }}
{% endmacro %}


{#- A CREATE TABLE's `tblproperties (...)`: every option of `options`, in its order, its
    value as a string literal. -#}
{% macro cdc_tblproperties_clause(options) -%}
    tblproperties (
        {%- for key, value in options.items() %}
        '{{ key }}' = {{ cdc_string_literal(value) }}{{ "," if not loop.last }}
        {%- endfor %}
    )
{%- endmacro %}


{#- ALTER TABLE `relation` SET TBLPROPERTIES: `properties` (sorted by name), each value
    as a string literal, run as statement `name`. -#}
{% macro cdc_set_tblproperties(relation, properties, name) %}
    {%- call statement(name) -%}
        alter table {{ relation }} set tblproperties (
            {%- for key, value in properties | dictsort %}
            '{{ key }}' = {{ cdc_string_literal(value) }}{{ "," if not loop.last }}
            {%- endfor %}
        )
    {%- endcall -%}
{% endmacro %}


{% macro cdc_key_join(left, right, primary_key) -%}
    {%- for key in primary_key -%}
        {{ left }}.`{{ key }}` = {{ right }}.`{{ key }}`{{ " and " if not loop.last }}
    {%- endfor -%}
{%- endmacro %}


{#- CREATE TABLE `relation` USING hudi AS `sql`, first removing the folder a build
    killed while creating the table may have left at its location: Spark refuses to
    create a managed table over it. Such a folder is found by listing its
    `.hoodie/hoodie.properties` (next to the batch work table, which always exists
    here, so the listing never fails), registered and dropped with PURGE.
    `partition_by`: the partition columns (cdc_partition_by), none for an unpartitioned table. -#}
{% macro cdc_create_hudi_table_as(relation, primary_key, sql, batch, table_options={}, partition_by=[]) %}
    {%- set location = [] -%}
    {%- for row in run_query('describe database extended ' ~ relation.schema) if row[0] == 'Location' -%}
        {%- do location.append(row[1] | replace("'", "")) -%}
    {%- endfor -%}
    {%- set location = location[0] -%}
    {%- set probe = relation.identifier ~ '__cdc_probe' -%}
    {%- call statement('cdc_probe_' ~ relation.identifier) -%}
        create or replace temporary view {{ probe }}
        using binaryFile
        options (
            path '{{ location }}/{{ "{" }}{{ relation.identifier }}/.hoodie,{{ batch.identifier }}{{ "}" }}',
            recursiveFileLookup 'true',
            pathGlobFilter 'hoodie.properties'
        )
    {%- endcall -%}
    {%- if run_query('select count(*) from ' ~ probe).columns[0].values()[0] > 0 -%}
        {{ log("WARNING " ~ model.name ~ ": " ~ location ~ "/" ~ relation.identifier ~ " holds a table the catalog "
            ~ "does not know (a build killed while creating it): removing it.", info=true) }}
        {%- call statement('cdc_register_orphan_' ~ relation.identifier) -%}
            create table {{ relation }} using hudi location '{{ location }}/{{ relation.identifier }}'
        {%- endcall -%}
        {%- call statement('cdc_drop_orphan_' ~ relation.identifier) -%}
            drop table {{ relation }} purge
        {%- endcall -%}
    {%- endif -%}
    {%- call statement('cdc_drop_probe_' ~ relation.identifier) -%}
        drop view if exists {{ probe }}
    {%- endcall -%}
    {%- call statement('cdc_create_' ~ relation.identifier) -%}
        create table {{ relation }}
        using hudi
        {%- if partition_by %}
        partitioned by (`{{ partition_by | join('`, `') }}`)
        {%- endif %}
        {{ cdc_hudi_tblproperties(primary_key, table_options) }}
        as {{ sql }}
    {%- endcall -%}
{% endmacro %}
