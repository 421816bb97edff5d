{#- How a hard-delete model's view reads its state table (docs/decisions/silver-read-path.md).

    A merge-on-read snapshot read merges every file group's log files into its base file
    row by row, and changes spread over the keys leave log files in every file group, so
    between compactions a read of silver cost several times a read of its base files.
    The view reads the base files only, through `<state>_ro` (Hudi's read-optimized
    query, column by column), and lays over them `<model>__cdc_recent`: a small parquet
    table of the rows the builds since the last compaction wrote to the state table
    (the view takes each key's newest), a key a reset removed as a row whose `_cdc_op`
    is the delete marker. A build appends its rows there, as one file, before the
    state table takes them, and empties it once a compaction has put everything in the
    base files. A parquet append, not a Hudi write: a Hudi upsert of a few rows costs
    more than the state table's own (docs/decisions/silver-read-path.md). -#}


{% macro cdc_recent_relation(target_relation) %}
    {{ return(target_relation.incorporate(type='table',
        path={'identifier': target_relation.identifier ~ '__cdc_recent'})) }}
{% endmacro %}


{#- The read-optimized table over the state table's folder: its base files only. -#}
{% macro cdc_base_files_relation(stored_relation) %}
    {{ return(stored_relation.incorporate(type='table',
        path={'identifier': stored_relation.identifier ~ '_ro'})) }}
{% endmacro %}


{#- Drops the read path's tables and the real-time table Hudi's metastore sync registers
    beside the read-optimized one (a new state table of another partitioning could not be
    synced to them); those two without PURGE: their folder is the state table's. -#}
{% macro cdc_drop_read_path(target_relation, stored_relation) %}
    {%- set real_time = stored_relation.incorporate(path={'identifier': stored_relation.identifier ~ '_rt'}) -%}
    {%- for relation in [cdc_base_files_relation(stored_relation), real_time] -%}
        {%- call statement('cdc_drop_synced_' ~ loop.index) -%}
            drop table if exists {{ relation }}
        {%- endcall -%}
    {%- endfor -%}
    {%- do cdc_drop_table(cdc_recent_relation(target_relation)) -%}
{% endmacro %}


{#- After a full refresh: the read-optimized table over the new state table (Hudi's sync
    to a Hive metastore registers it with the state table; created here where nothing
    did), an empty recent table, and the view over both. -#}
{% macro cdc_create_read_path(target_relation, stored_relation, primary_key) %}
    {%- set base = cdc_base_files_relation(stored_relation) -%}
    {%- set recent = cdc_recent_relation(target_relation) -%}
    {%- set location = [] -%}
    {%- for row in run_query('describe table extended ' ~ stored_relation) if row[0] == 'Location' -%}
        {%- do location.append(row[1]) -%}
    {%- endfor -%}
    {%- call statement('cdc_create_base_files') -%}
        create table if not exists {{ base }} using hudi
        location {{ cdc_string_literal(location[0]) }}
        options ('hoodie.query.as.ro.table' = 'true')
    {%- endcall -%}
    {%- call statement('cdc_create_recent') -%}
        create table {{ recent }} using parquet
        as select `{{ cdc_state_columns() | join('`, `') }}` from {{ stored_relation }} where false
    {%- endcall -%}
    {%- set columns = cdc_state_columns() -%}
    {#- per key the newest row of the recent table; of two of equal order, a reset's
        tombstone, written after the row it supersedes (as Hudi lets the later of two
        equal orders win) -#}
    {%- call statement('cdc_create_view') -%}
        create or replace view {{ target_relation }} as
        with recent as (
            select `{{ columns | join('`, `') }}`
            from (
                select
                    *,
                    row_number() over (
                        partition by `{{ primary_key | join('`, `') }}`
                        order by _cdc_order desc, _cdc_op = {{ cdc_string_literal(cdc_delete_marker()) }} desc
                    ) as _cdc_rank
                from {{ recent }}
            ) as ranked
            where _cdc_rank = 1
        ),

        current_rows as (
            select base.`{{ columns | join('`, base.`') }}`
            from {{ base }} as base
            left anti join recent
                on {{ cdc_key_join('base', 'recent', primary_key) }}
            union all
            select recent.`{{ columns | join('`, recent.`') }}`
            from recent
            where recent._cdc_op != {{ cdc_string_literal(cdc_delete_marker()) }}
        )

        select `{{ cdc_silver_columns() | join('`, `') }}`
        from current_rows
        where not _cdc_deleted
    {%- endcall -%}
{% endmacro %}


{#- The read path's tables exist (a table built before it gets rebuilt). -#}
{% macro cdc_has_read_path(target_relation, stored_relation) %}
    {{ return(load_relation(cdc_recent_relation(target_relation)) is not none
        and load_relation(cdc_base_files_relation(stored_relation)) is not none) }}
{% endmacro %}


{#- Empties the recent table when the state table's newest completed instant is a
    compaction: its base files then hold every row the recent table does. Run before the
    build writes, under the build's lock. -#}
{% macro cdc_trim_recent(target_relation, stored_relation) %}
    {%- set newest = run_query("call show_commits(table => '" ~ stored_relation ~ "', limit => 1)") -%}
    {%- if newest.rows | length == 1 and newest.columns['action'].values()[0] == 'commit' -%}
        {%- call statement('cdc_trim_recent') -%}
            truncate table {{ cdc_recent_relation(target_relation) }}
        {%- endcall -%}
    {%- endif -%}
{% endmacro %}


{#- Writes `rows_sql` (rows of the state table's columns, alias-free) to the recent table
    before the state table takes them. `checked`: leave out a row whose key the base
    files hold with a newer `_cdc_order` (a late event the state table keeps out); a
    batch whose oldest change is newer than every stored row (cdc.max_order) needs no
    such look-up. -#}
{% macro cdc_write_recent(target_relation, stored_relation, rows_sql, primary_key, checked) %}
    {%- set columns = cdc_state_columns() -%}
    {%- call statement('cdc_write_recent') -%}
        insert into {{ cdc_recent_relation(target_relation) }} (`{{ columns | join('`, `') }}`)
        with incoming as ({{ rows_sql }})
        select /*+ COALESCE(1) */ incoming.`{{ columns | join('`, incoming.`') }}`
        from incoming
        {%- if checked %}
        left anti join (
            select base.`{{ primary_key | join('`, base.`') }}`, base._cdc_order
            from {{ cdc_base_files_relation(stored_relation) }} as base
            left semi join incoming
                on {{ cdc_key_join('base', 'incoming', primary_key) }}
        ) as newer
            on {{ cdc_key_join('incoming', 'newer', primary_key) }} and newer._cdc_order > incoming._cdc_order
        {%- endif %}
    {%- endcall -%}
{% endmacro %}
