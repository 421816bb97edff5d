{#- How a hard-delete model's view reads its state table (docs/decisions/silver-read-path.md).

    A merge-on-read snapshot read merges every file group's log files into its base file
    row by row, and changes spread over the keys leave log files in every file group, so
    between compactions a read of silver cost several times a read of its base files.
    The view reads the base files only, through `<state>_ro` (Hudi's read-optimized
    query, column by column), and lays over them `<model>__cdc_recent`: a small parquet
    table of the rows the builds since the last compaction wrote to the state table
    (the view takes each key's newest), a key a reset removed as a row whose `_cdc_op`
    is the delete marker. A parquet write, not a Hudi one: a Hudi upsert of a few rows
    costs more than the state table's own (docs/decisions/silver-read-path.md).

    Readers see one build at a time (docs/decisions/silver-atomic-reads.md): each build
    writes its rows to a new partition of the recent table, a generation
    (`cdc_generation`: the metastore's partition filters refuse a name that begins with
    `_`), that no view names yet; the state table takes them; then one
    metastore change, the view's new text, names the generations it reads. A build killed
    before that change left nothing a reader sees; a reader that resolved the view before
    it reads the generations it named, which stay for the next
    `cdc_read_retention_generations` builds. A compaction changes no answer of the view:
    it puts into the base files only rows a published generation already holds (the build
    compacts after publishing, and the runner leaves a table with unpublished commits
    alone), and the first build after it publishes a view without the generations it
    covered. -#}


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
    did), an empty recent table partitioned by generation, and the view over both. -#}
{% macro cdc_create_read_path(target_relation, stored_relation, primary_key) %}
    {%- set base = cdc_base_files_relation(stored_relation) -%}
    {%- set location = [] -%}
    {%- for row in run_query('describe table extended ' ~ stored_relation) if row[0] == 'Location' -%}
        {%- do location.append(row[1]) -%}
    {%- endfor -%}
    {%- call statement('cdc_create_base_files') -%}
        create table if not exists {{ base }} using hudi
        location {{ cdc_string_literal(location[0]) }}
        options ('hoodie.query.as.ro.table' = 'true')
    {%- endcall -%}
    {#- DDL, not CREATE TABLE AS SELECT: an empty partitioned write fails on S3A (its
        committer lists a `_temporary` folder object storage never made) -#}
    {%- set types = {} -%}
    {%- for column in adapter.get_columns_in_relation(stored_relation) -%}
        {%- do types.update({column.name | lower: column.dtype}) -%}
    {%- endfor -%}
    {%- call statement('cdc_create_recent') -%}
        create table {{ cdc_recent_relation(target_relation) }} (
            {%- for name in cdc_state_columns() %}
            `{{ name }}` {{ types[name | lower] }},
            {%- endfor %}
            cdc_generation bigint
        )
        using parquet
        partitioned by (cdc_generation)
    {%- endcall -%}
    {%- do cdc_publish_view(target_relation, primary_key, [], cdc_newest_instants(stored_relation, 1)[0], created=true) -%}
{% endmacro %}


{#- The model's view over the base files and the recent table's `generations` (a list of
    numbers; none: the base files alone), with the generations and `published` (the
    state table's newest instant they hold: the runner compacts no table with a newer
    one) as view properties. `created`: after a full refresh, which promises readers nothing.
    Else readers switch in one metastore change, ALTER VIEW ... AS (CREATE OR REPLACE
    VIEW drops the view and creates it again: a read between the two finds no view);
    the properties follow in a second change, so that a build killed between the two
    leaves them behind the view's text, never ahead: the next build then publishes
    again the rows of the killed one (cdc_write_unpublished) and the runner compacts
    nothing they hold. -#}
{% macro cdc_publish_view(target_relation, primary_key, generations, published, created=false) %}
    {%- set properties -%}
        tblproperties (
            'cdc.generations' = '{{ generations | join(",") }}',
            'cdc.published' = {{ cdc_string_literal(published[0] if published else '') }}
        )
    {%- endset -%}
    {%- if created -%}
        {%- call statement('cdc_publish_view') -%}
            create or replace view {{ target_relation }}
            {{ properties }}
            as
            {{ cdc_view_sql(target_relation, primary_key, generations, published) }}
        {%- endcall -%}
    {%- else -%}
        {%- call statement('cdc_publish_view') -%}
            alter view {{ target_relation }} as
            {{ cdc_view_sql(target_relation, primary_key, generations, published) }}
        {%- endcall -%}
        {%- call statement('cdc_publish_view_properties') -%}
            alter view {{ target_relation }} set {{ properties }}
        {%- endcall -%}
    {%- endif -%}
{% endmacro %}


{#- The view's query (cdc_publish_view). Base rows committed after `published` are left
    out: a Hudi write adds a base file at once where it creates a file group, and a
    compaction keeps each row's commit time. Each key's newest recent row wins; of two
    of equal order, the later generation's, as Hudi lets the later write win (a row
    written by hand keeps its order), and in one generation a reset's tombstone,
    written after the row it supersedes. -#}
{% macro cdc_view_sql(target_relation, primary_key, generations, published) %}
    {%- set columns = cdc_state_columns() -%}
    with recent as (
        select `{{ columns | join('`, `') }}`
        from (
            select
                *,
                row_number() over (
                    partition by `{{ primary_key | join('`, `') }}`
                    order by
                        _cdc_order desc,
                        cdc_generation desc,
                        _cdc_op = {{ cdc_string_literal(cdc_delete_marker()) }} desc
                ) as _cdc_rank
            from {{ cdc_recent_relation(target_relation) }}
            where {{ 'cdc_generation in (' ~ generations | join(', ') ~ ')' if generations else 'false' }}
        ) as ranked
        where _cdc_rank = 1
    ),

    current_rows as (
        select base.`{{ columns | join('`, base.`') }}`
        from {{ cdc_base_files_relation(cdc_state_relation(target_relation)) }} as base
        left anti join recent
            on {{ cdc_key_join('base', 'recent', primary_key) }}
        {#- a write that creates a file group (a key in a new bucket) adds a base file at
            once: only rows committed by the published instant -#}
        where base._hoodie_commit_time <= {{ cdc_string_literal(published[0] if published else '') }}
        union all
        select recent.`{{ columns | join('`, recent.`') }}`
        from recent
        where recent._cdc_op != {{ cdc_string_literal(cdc_delete_marker()) }}
    )

    select `{{ cdc_silver_columns() | join('`, `') }}`
    from current_rows
    where not _cdc_deleted
{%- endmacro %}


{#- The read path exists in this layout: the view names its generations (its
    `view_properties` have them; a model built before them is rebuilt) and the
    read-optimized table is there. -#}
{% macro cdc_has_read_path(view_properties, stored_relation) %}
    {{ return('cdc.generations' in view_properties
        and load_relation(cdc_base_files_relation(stored_relation)) is not none) }}
{% endmacro %}


{#- The newest `limit` completed instants of `relation`'s timeline, newest first, as
    (instant, action) pairs. -#}
{% macro cdc_newest_instants(relation, limit) %}
    {%- set found = run_query("call show_commits(table => '" ~ relation ~ "', limit => " ~ limit ~ ")") -%}
    {%- set instants = [] -%}
    {%- for row in found.rows -%}
        {%- do instants.append([row['commit_time'] | string, row['action']]) -%}
    {%- endfor -%}
    {{ return(instants) }}
{% endmacro %}


{#- Where a build of the view stands, read under the build's lock before it writes:
    `generations`, those the view reads, none once the state table's newest instant is a
    compaction (its base files then hold every row they did); `generation`, the new one
    this build writes (above every partition there, a killed build's too);
    `deltas`, the delta commits since the last compaction; `partitions`, the
    generations stored; `unpublished`, the instant the view published when the state
    table has a newer delta commit (a build killed before it published, a row written
    by hand), else none. -#}
{% macro cdc_read_path_state(target_relation, stored_relation, view_properties) %}
    {%- set instants = cdc_newest_instants(stored_relation, 10) -%}
    {%- set compacted = instants | length > 0 and instants[0][1] == 'commit' -%}
    {%- set deltas = [] -%}
    {%- for instant, action in instants -%}
        {%- if action == 'commit' -%}{%- break -%}{%- endif -%}
        {%- do deltas.append(instant) -%}
    {%- endfor -%}
    {%- set listed = view_properties.get('cdc.generations', '') -%}
    {%- set published = view_properties.get('cdc.published', '') -%}
    {%- set newer = [] -%}
    {%- for instant, action in instants if action == 'deltacommit' and instant > published -%}
        {%- do newer.append(instant) -%}
    {%- endfor -%}
    {%- set partitions = [] -%}
    {%- for row in run_query('show partitions ' ~ cdc_recent_relation(target_relation)) -%}
        {%- do partitions.append(row[0].split('=')[1] | int) -%}
    {%- endfor -%}
    {{ return({
        'generations': [] if compacted or not listed else listed.split(',') | map('int') | list,
        'generation': (partitions | max if partitions else 0) + 1,
        'deltas': deltas | length,
        'partitions': partitions | sort,
        'unpublished': published if published and newer else none,
        'written': false,
    }) }}
{% endmacro %}


{#- Writes `rows_sql` (rows of the state table's columns, alias-free) to the build's
    generation of the recent table (`read_path`: cdc_read_path_state) before the state
    table takes them: the build's first write replaces whatever a killed build left in
    that partition. `checked`: leave out a row whose key the base files hold with a newer
    `_cdc_order` (a late event the state table keeps out); a batch whose oldest change is
    newer than every stored row (cdc.max_order) needs no such look-up. -#}
{% macro cdc_write_recent(target_relation, stored_relation, rows_sql, primary_key, checked, read_path) %}
    {%- set columns = cdc_state_columns() -%}
    {%- call statement('cdc_write_recent') -%}
        insert {{ 'into' if read_path.written else 'overwrite' }} {{ cdc_recent_relation(target_relation) }}
        partition (cdc_generation = {{ read_path.generation }}) (`{{ columns | join('`, `') }}`)
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
    {%- do read_path.update({'written': true}) -%}
{% endmacro %}


{#- The state table's rows no view has published (`read_path.unpublished`: a build
    killed after its upsert, a row written by hand) go to the build's generation first,
    read from Hudi's snapshot of the state table (which merges its log files: only
    then), so that the view shows them with this build and a compaction never shows
    them before a view names them. -#}
{% macro cdc_write_unpublished(target_relation, stored_relation, primary_key, read_path) %}
    {%- if read_path.unpublished is not none -%}
        {%- set rows_sql -%}
            select `{{ cdc_state_columns() | join('`, `') }}`
            from {{ stored_relation }}
            where _hoodie_commit_time > {{ cdc_string_literal(read_path.unpublished) }}
        {%- endset -%}
        {%- do cdc_write_recent(target_relation, stored_relation, rows_sql, primary_key, false, read_path) -%}
    {%- endif -%}
{% endmacro %}


{#- After the build's upserts: the view names the build's generation (when it wrote one)
    with those it read, or drops those a compaction covered, in one metastore change;
    then, where this process alone writes the table (cdc_single_process: elsewhere the
    runner's table services compact), a compaction once `max_deltas` delta commits
    wait, which changes no answer of the view (this build's rows are published); then
    the generations no view has named within the last `cdc_read_retention_generations`
    builds are dropped. -#}
{% macro cdc_publish_build(target_relation, stored_relation, primary_key, read_path, max_deltas=5) %}
    {%- set generations = read_path.generations + ([read_path.generation] if read_path.written else []) -%}
    {%- set newest = cdc_newest_instants(stored_relation, 1) -%}
    {%- do cdc_publish_view(target_relation, primary_key, generations, newest[0] if newest else none) -%}
    {%- set commits = read_path.deltas + (1 if read_path.written else 0) -%}
    {%- if commits >= max_deltas and cdc_single_process() -%}
        {%- call statement('cdc_compact') -%}
            call run_compaction(op => 'scheduleAndExecute', table => '{{ stored_relation }}',
                options => 'hoodie.compact.inline.max.delta.commits={{ max_deltas }}')
        {%- endcall -%}
    {%- endif -%}
    {%- set retained = var('cdc_read_retention_generations', 10) | int -%}
    {%- set stored = read_path.partitions + ([read_path.generation] if read_path.written else []) -%}
    {%- set dropped = [] -%}
    {%- for generation in stored[:-retained] if generation not in generations -%}
        {%- do dropped.append(generation) -%}
    {%- endfor -%}
    {%- if dropped -%}
        {%- call statement('cdc_drop_generations') -%}
            alter table {{ cdc_recent_relation(target_relation) }} drop if exists
            {%- for generation in dropped %}
            partition (cdc_generation = {{ generation }}){{ "," if not loop.last }}
            {%- endfor %}
        {%- endcall -%}
    {%- endif -%}
{% endmacro %}
