{#- What a hudi_incremental model calls: its silver model's rows. Run on its own (`dbt
    show`, `dbt compile`, a dbt unit test) it is the silver view itself, so the model's
    SQL is the table's full current result; the materialization swaps the part between
    the two markers for the rows a build reads (hudi_incremental_model_sql). -#}
{% macro hudi_incremental_source(relation) %}
    {{ hudi_incremental_source_begin() }}
    select * from {{ relation }}
    {{ hudi_incremental_source_end() }}
{% endmacro %}


{% macro hudi_incremental_source_begin() %}{{ return('/* hudi incremental source: begin */') }}{% endmacro %}


{% macro hudi_incremental_source_end() %}{{ return('/* hudi incremental source: end */') }}{% endmacro %}


{#- The model's compiled `sql` with its silver rows (between the markers) swapped for
    `rows_sql`, a query of the same columns. -#}
{% macro hudi_incremental_model_sql(sql, rows_sql) %}
    {%- set head = sql.split(hudi_incremental_source_begin()) -%}
    {%- set tail = head[1].split(hudi_incremental_source_end()) -%}
    {{ return(head[0] ~ rows_sql ~ tail[1]) }}
{% endmacro %}


{#- The silver view's columns, which the rows swapped in keep (never `*` of the state
    table, which would add Hudi's `_hoodie_*` meta columns and `_cdc_deleted`). -#}
{% macro hudi_incremental_source_columns(source) %}
    {%- set columns = [] -%}
    {%- for column in adapter.get_columns_in_relation(source) if not column.name.startswith('_hoodie_') -%}
        {%- do columns.append(column.name) -%}
    {%- endfor -%}
    {{ return(columns) }}
{% endmacro %}


{#- Silver's state table as of `as_of` (Hudi time travel to a completion time): its live
    rows, or with `instants` the rows the commits `instants` wrote (each key's row as
    silver holds it then: a key whose write in them lost, by event order, to the row of
    an earlier commit is not there), deleted keys included and flagged. -#}
{% macro hudi_incremental_snapshot_sql(state, columns, as_of, instants=none) -%}
    select `{{ columns | join('`, `') }}`{{ ', _cdc_deleted' if instants is not none }}
    from {{ state }} timestamp as of '{{ as_of }}'
    {%- if instants is none %}
    where not _cdc_deleted
    {%- else %}
    where _hoodie_commit_time in ('{{ instants | join("', '") }}')
    {%- endif %}
{%- endmacro %}


{#- Silver's completed commits on its active timeline, oldest completion first, each as
    `instant` (its request time, the rows' `_hoodie_commit_time`), `completed` (its
    completion time) and `action`. Compared as text of one length: agate may type them
    as numbers. -#}
{% macro hudi_incremental_timeline(state) %}
    {%- set commits = [] -%}
    {%- set rows = run_query("call show_commits(table => '" ~ state.schema ~ "." ~ state.identifier
        ~ "', limit => 2147483647)") -%}
    {%- for row in rows -%}
        {%- do commits.append({'instant': hudi_incremental_instant(row['commit_time']),
            'completed': hudi_incremental_instant(row['state_transition_time']), 'action': row['action']}) -%}
    {%- endfor -%}
    {{ return(commits | sort(attribute='completed')) }}
{% endmacro %}


{% macro hudi_incremental_instant(value) %}
    {%- set text = value | string -%}
    {%- if not modules.re.match('^[0-9]{17}$', text) -%}
        {{ exceptions.raise_compiler_error("Model " ~ model.name ~ ": '" ~ text ~ "' is not a Hudi instant "
            ~ "(yyyyMMddHHmmssSSS); Hudi's timeline layout is not the one this materialization reads.") }}
    {%- endif -%}
    {{ return(text) }}
{% endmacro %}


{#- When the catalog created `state`: a silver full refresh drops and creates it again. -#}
{% macro hudi_incremental_created(state) %}
    {%- for row in run_query('describe table extended ' ~ state) if row[0] == 'Created Time' -%}
        {{ return(row[1] | string) }}
    {%- endfor -%}
    {{ return('') }}
{% endmacro %}


{#- The rows silver's commits in `window` deleted outright (Hudi deletes, not rows flagged
    `_cdc_deleted`), from each commit's write statistics: `count`, and the `commits` that
    did. A compaction (a merge-on-read table's `commit`) only rewrites what earlier delta
    commits wrote, and is not counted. -#}
{% macro hudi_incremental_hard_deletes(state, window) %}
    {%- set instants = window | map(attribute='instant') | list -%}
    {%- set merge_on_read = (cdc_table_properties(state).get('type') or '') | lower in ['mor', 'merge_on_read'] -%}
    {%- set found = {'count': 0, 'commits': []} -%}
    {%- set rows = run_query("call show_commits_metadata(table => '" ~ state.schema ~ "." ~ state.identifier
        ~ "', limit => 2147483647)") -%}
    {%- for row in rows if (row['commit_time'] | string) in instants and (row['num_deletes'] or 0) > 0
            and not (merge_on_read and row['action'] == 'commit') -%}
        {%- do found.update({'count': found.count + row['num_deletes'] | int}) -%}
        {%- if (row['commit_time'] | string) not in found.commits -%}
            {%- do found.commits.append(row['commit_time'] | string) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(found) }}
{% endmacro %}


{#- The gold table's Hudi properties: its table type (hudi_incremental_table_type),
    record key = `unique_key`, no ordering field (a MERGE replaces the row), zstd and
    files of at most 16 MiB as silver's (docs/decisions/silver-index-codec-file-size.md),
    then the model's `hudi_options`. Copy-on-write: the SIMPLE index, and readers read
    plain parquet files; merge-on-read: silver's layout (the bucket index, whose lookup
    is a hash, and inline compaction every fifth commit), so that a window's MERGE
    appends log files instead of rewriting every file group it touches
    (docs/decisions/gold-incremental-query.md). -#}
{% macro hudi_incremental_tblproperties(unique_key) %}
    {%- set options = {
        'type': hudi_incremental_table_type(),
        'primaryKey': unique_key | join(','),
        'hoodie.index.type': 'SIMPLE',
    } -%}
    {%- if options.type == 'mor' -%}
        {%- do options.update(cdc_state_table_options()) -%}
    {%- endif -%}
    {%- do options.update(cdc_parquet_file_options()) -%}
    {%- do options.update(config.get('hudi_options') or {}) -%}
    {{ cdc_tblproperties_clause(options) }}
{% endmacro %}


{#- Records on the gold table the silver commit it now holds (`plan.end`), the state
    table it read, that table's creation time and the md5 of the model's compiled SQL,
    with `extra` properties: the last write of a build, so a build that stops before it
    reads its window again. -#}
{% macro hudi_incremental_record(target_relation, state, plan, extra={}) %}
    {%- set properties = {
        'hudi_incremental.source': state.schema ~ '.' ~ state.identifier,
        'hudi_incremental.source_created': plan.created,
        'hudi_incremental.consumed_instant': plan.end.instant,
        'hudi_incremental.consumed_completion_time': plan.end.completed,
        'hudi_incremental.model_sql_md5': plan.model_sql_md5,
    } -%}
    {%- do properties.update(extra) -%}
    {%- do cdc_set_tblproperties(target_relation, properties, 'hudi_incremental_record') -%}
{% endmacro %}


{#- `alias`.`key` = `other`.`key` for each key column: the MERGE's condition, on the
    record key as Hudi requires. -#}
{% macro hudi_incremental_key_join(alias, other, unique_key) -%}
    {%- for key in unique_key -%}
        {{ alias }}.`{{ key }}` = {{ other }}.`{{ key }}`{{ " and " if not loop.last }}
    {%- endfor -%}
{%- endmacro %}
