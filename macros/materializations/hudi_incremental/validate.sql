{#- Checks made before a hudi_incremental build reads anything; each error says how to
    fix it. Returns `unique_key` as a list. -#}
{% macro hudi_incremental_validate_config() %}
    {%- if config.get('file_format') != 'hudi' -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": materialized='hudi_incremental' needs file_format='hudi' (got '"
            ~ config.get('file_format') ~ "'). Add file_format='hudi' to the model's config.") }}
    {%- endif -%}
    {%- if config.get('partition_by') -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": hudi_incremental does not support partition_by (a key whose partition "
            ~ "value changes would be kept twice). Remove partition_by.") }}
    {%- endif -%}
    {%- set unique_key = config.get('unique_key') -%}
    {%- set unique_key = [unique_key] if unique_key is string else (unique_key or []) | list -%}
    {%- if unique_key | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": hudi_incremental needs unique_key, the primary key of the silver model it "
            ~ "reads (each gold row keeps the key of the silver row it comes from), e.g. unique_key='payment_id'.") }}
    {%- endif -%}
    {%- for name in unique_key if not modules.re.match('^[A-Za-z_][A-Za-z0-9_]*$', name) -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": unique_key column '" ~ name ~ "' is not a plain column name.") }}
    {%- endfor -%}
    {%- set options = config.get('hudi_options') or {} -%}
    {%- for name in options if (name | lower) in ['type', 'hoodie.table.type', 'hoodie.datasource.write.table.type',
            'primarykey', 'hoodie.datasource.write.recordkey.field', 'precombinefield', 'orderingfields',
            'hoodie.datasource.write.precombine.field', 'hoodie.table.ordering.fields'] -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": hudi_options sets " ~ name ~ ", which hudi_incremental derives itself "
            ~ "(the table type from the table_type config, record key = unique_key, no ordering field: the newest "
            ~ "window wins). Remove it.") }}
    {%- endfor -%}
    {{ return(unique_key) }}
{% endmacro %}


{#- The silver model the gold model reads: its one parent, read through
    hudi_incremental_source exactly once in the model's compiled `sql`. A second parent
    would be a join, which a window of one table's changes cannot keep right
    (docs/how-to/build-gold-incrementally.md). -#}
{% macro hudi_incremental_source_relation(sql) %}
    {%- set parents = model.depends_on.nodes | list -%}
    {%- if parents | length != 1 or not parents[0].startswith('model.') -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ " depends on " ~ parents | join(', ') ~ "; a hudi_incremental model reads "
            ~ "exactly one silver model, through hudi_incremental_source(ref('<model>')), and joins nothing: a "
            ~ "change to a joined table would not reach the rows it changes. Make it materialized='table'.") }}
    {%- endif -%}
    {%- set node = graph.nodes[parents[0]] -%}
    {%- set relation = api.Relation.create(database=node.database, schema=node.schema,
        identifier=node.alias, type='view') -%}
    {%- set pieces = sql.split(hudi_incremental_source_begin()) -%}
    {%- if pieces | length != 2 or (pieces[1].split(hudi_incremental_source_end()) | length) != 2 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": its SQL must read its silver model through "
            ~ "hudi_incremental_source(ref('" ~ node.name ~ "')) exactly once, e.g. `with rows as "
            ~ "({{ hudi_incremental_source(ref('" ~ node.name ~ "')) }}) select ... from rows`; found it "
            ~ (pieces | length - 1) ~ " time(s).") }}
    {%- endif -%}
    {{ return(relation) }}
{% endmacro %}


{#- The state table behind the silver view `source` (a hard-delete cdc_incremental
    model), checked to exist and to be keyed by `unique_key`. -#}
{% macro hudi_incremental_state_relation(source, unique_key) %}
    {%- set state = load_relation(cdc_state_relation(source)) -%}
    {%- if state is none -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ " reads " ~ source ~ ", which has no state table "
            ~ cdc_state_relation(source) ~ ": hudi_incremental reads a silver model materialized by "
            ~ "cdc_incremental with hard deletes (the default), after its first build. Build it first: "
            ~ "dbt build --select +" ~ model.name) }}
    {%- endif -%}
    {%- set properties = cdc_table_properties(state) -%}
    {%- set record_key = (properties.get('primaryKey') or '').split(',') | map('trim') | list -%}
    {%- if (record_key | map('lower') | list) != (unique_key | map('lower') | list) -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": unique_key " ~ unique_key ~ " is not the record key " ~ record_key ~ " of "
            ~ state ~ ". Set unique_key to the silver model's primary key: a window's deleted keys are found by it.") }}
    {%- endif -%}
    {{ return(state) }}
{% endmacro %}


{#- How this build goes, from silver's `timeline` (hudi_incremental_timeline), the
    model's compiled `sql` and the table as it exists: `full_refresh`, `reason` (why an
    existing table is rebuilt, or none), `end` (silver's newest commit, which the build
    reads as of and consumes), `begin` (the commit the table consumed last) and `window`
    (silver's commits after `begin`, up to `end`). A rebuild is logged with its reason. -#}
{% macro hudi_incremental_plan(existing_relation, state, timeline, sql) %}
    {%- if timeline | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": " ~ state ~ " has no completed commit. Build its silver model first.") }}
    {%- endif -%}
    {%- set plan = {'full_refresh': true, 'reason': none, 'end': timeline[-1], 'begin': none, 'window': [],
        'created': hudi_incremental_created(state), 'model_sql_md5': local_md5(sql)} -%}
    {%- if existing_relation is none or should_full_refresh() -%}
        {{ return(plan) }}
    {%- endif -%}
    {%- set reason = hudi_incremental_rebuild_reason(existing_relation, state, timeline, plan) -%}
    {%- if reason is not none -%}
        {{ log("WARNING " ~ model.name ~ ": rebuilding " ~ existing_relation ~ " from all of silver: " ~ reason ~ ".",
            info=true) }}
        {%- do plan.update({'reason': reason}) -%}
    {%- else -%}
        {%- do plan.update({'full_refresh': false}) -%}
    {%- endif -%}
    {{ return(plan) }}
{% endmacro %}


{#- The gold table's Hudi table type: the model's `table_type` config, else the var
    `cdc_gold_table_type`, 'cow' (copy-on-write) or 'mor' (merge-on-read). -#}
{% macro hudi_incremental_table_type() %}
    {%- set table_type = (config.get('table_type') or var('cdc_gold_table_type', 'cow')) | string | lower -%}
    {%- if table_type not in ['cow', 'mor'] -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": table_type '" ~ table_type ~ "' is neither cow (copy-on-write) nor mor "
            ~ "(merge-on-read); set the model's table_type config or the var cdc_gold_table_type to one of them.") }}
    {%- endif -%}
    {{ return(table_type) }}
{% endmacro %}


{#- Why the existing table cannot take the window after the commit it consumed last, or
    none (then `plan` gets `begin` and `window`):
      - it is not a table this materialization finished building (a view or table of
        another materialization, or its first build stopped before recording a commit);
      - its table type is not the model's (hudi_incremental_table_type);
      - the model's compiled SQL changed (its md5 is recorded with the commit): rows the
        windows do not touch would keep the old logic;
      - it was built from another silver table, or from a state table since created anew
        (silver's full refresh: new rows, new instants);
      - the commit it consumed is no longer on silver's active timeline (archived, or
        rolled back): the window's commits can no longer be listed, nor checked for what
        follows;
      - a commit of the window deleted rows outright (silver applies a truncate or a
        re-snapshot with Hudi deletes) or replaced file groups: the rows it removed are
        not in any snapshot, so the window cannot show them. -#}
{% macro hudi_incremental_rebuild_reason(existing_relation, state, timeline, plan) %}
    {%- if existing_relation.is_view -%}
        {{ return("it is a view, not a table this materialization built") }}
    {%- endif -%}
    {%- set properties = cdc_table_properties(existing_relation) -%}
    {%- set consumed = properties.get('hudi_incremental.consumed_instant') -%}
    {%- if consumed is none or properties.get('primaryKey') is none -%}
        {{ return("it records no silver commit it consumed (built by another materialization, or its last build "
            ~ "stopped half way)") }}
    {%- endif -%}
    {%- set stored_type = (properties.get('type') or 'cow') | lower -%}
    {%- set stored_type = {'copy_on_write': 'cow', 'merge_on_read': 'mor'}.get(stored_type, stored_type) -%}
    {%- set wanted_type = hudi_incremental_table_type() -%}
    {%- if stored_type != wanted_type -%}
        {{ return("its table type is " ~ stored_type ~ ", the model's " ~ wanted_type) }}
    {%- endif -%}
    {%- set source_name = state.schema ~ '.' ~ state.identifier -%}
    {%- if properties.get('hudi_incremental.source') != source_name -%}
        {{ return("it was built from " ~ properties.get('hudi_incremental.source') ~ ", the model now reads "
            ~ source_name) }}
    {%- endif -%}
    {%- if properties.get('hudi_incremental.model_sql_md5') != plan.model_sql_md5 -%}
        {{ return("the model's SQL changed since the table was built") }}
    {%- endif -%}
    {%- if properties.get('hudi_incremental.source_created') != plan.created -%}
        {{ return(source_name ~ " was created anew (a full refresh of silver) at " ~ plan.created
            ~ " since the table consumed it") }}
    {%- endif -%}
    {%- set begin = timeline | selectattr('instant', 'equalto', consumed) | list -%}
    {%- if begin | length == 0 and consumed > timeline[-1].instant -%}
        {{ return("silver commit " ~ consumed ~ ", which the table consumed last, is newer than " ~ source_name
            ~ "'s newest (" ~ timeline[-1].instant ~ "): silver was rolled back or restored") }}
    {%- elif begin | length == 0 -%}
        {{ return("silver commit " ~ consumed ~ ", which the table consumed last, is older than the earliest "
            ~ source_name ~ " still lists (" ~ timeline[0].instant ~ ": archived), so the commits since cannot "
            ~ "be listed nor checked for deletes") }}
    {%- endif -%}
    {%- set window = timeline | selectattr('completed', 'gt', begin[0].completed) | list -%}
    {%- do plan.update({'begin': begin[0], 'window': window}) -%}
    {%- if window | length == 0 -%}
        {{ return(none) }}
    {%- endif -%}
    {%- for commit in window if commit.action not in ['deltacommit', 'commit'] -%}
        {{ return("silver commit " ~ commit.instant ~ " is a " ~ commit.action ~ ", whose replaced rows a "
            ~ "window does not show") }}
    {%- endfor -%}
    {%- set deletes = hudi_incremental_hard_deletes(state, window) -%}
    {%- if deletes.count > 0 -%}
        {{ return("silver deleted " ~ deletes.count ~ " rows outright in commit(s) " ~ deletes.commits | join(', ')
            ~ " (a truncate or re-snapshot applied as Hudi deletes), which a window cannot show") }}
    {%- endif -%}
    {{ return(none) }}
{% endmacro %}
