{#- Applying resets (a truncate, a complete re-snapshot: see cdc_resets) to a silver
    table that already exists: the rows (and deleted keys) they supersede are deleted
    before the batch is merged. The resets last applied are kept as the table property
    `cdc.resets` (`applied`, as read when the build began), so the deletes run only
    when a new reset arrives. -#}
{% macro cdc_batch_resets(batch, with_groups=false) %}
    {%- set rows = run_query(
        'select _cdc_truncated_before, _cdc_snapshot_position, _cdc_snapshot_offsets, _cdc_reset_groups from '
        ~ batch ~ " where _cdc_row = 'reset'") -%}
    {%- if rows | length != 1 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": its batch has " ~ rows | length ~ " reset rows instead of one. A silver "
            ~ "model may add columns around cdc_current_state / cdc_history_versions (`select *, <expr> as <name> "
            ~ "from current_state`) but not filter, join or aggregate its rows: do that in a gold model.") }}
    {%- endif -%}
    {%- set resets = {
        '_cdc_truncated_before': rows[0][0],
        '_cdc_snapshot_position': rows[0][1],
        '_cdc_snapshot_offsets': rows[0][2],
    } -%}
    {#- with_groups: also the reset groups (JSON) a later build starts from (cdc_resets) -#}
    {{ return([resets, rows[0][3]] if with_groups else resets) }}
{% endmacro %}


{#- The reset groups a table's earlier builds stored (`stored`, its cdc.reset_groups
    property, or none) as a list for cdc_stages; none when there are none yet (a table
    built before they were kept: its next build scans all of bronze once and keeps them). -#}
{% macro cdc_stored_reset_groups(relation, stored) %}
    {%- if stored is none -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set groups = fromjson(stored) -%}
    {%- if groups is not sequence or groups is string
            or groups | rejectattr('position', 'defined') | list | length > 0 -%}
        {{ exceptions.raise_compiler_error(
            relation ~ " has a malformed cdc.reset_groups property. Rebuild it: "
            ~ "dbt build --full-refresh --select " ~ model.name) }}
    {%- endif -%}
    {{ return(groups) }}
{% endmacro %}


{#- Hard deletes: the superseded rows of the state table, live rows and deleted keys
    alike, are upserted back with the delete marker in `_cdc_op` and their own
    `_cdc_order` (an incoming event of equal order replaces the stored one), so Hudi
    deletes them on either table type. A DELETE statement would carry no ordering
    value, which merge-on-read with event-time ordering may let the stored row win
    against (apache/hudi#19978). The same rows go to the view's recent table first
    (read_path.sql, the build's generation `read_path`), so the view stops showing them with the build. Soft deletes: a DELETE on
    the copy-on-write table. -#}
{% macro cdc_apply_resets(target_relation, stored_relation, resets, applied, primary_key, read_path=none) %}
    {%- if resets.values() | select | list | length == 0 or tojson(resets, sort_keys=true) == applied -%}
        {{ return(false) }}
    {%- endif -%}
    {%- set superseded = cdc_is_superseded('_cdc_order', cdc_resets_values(resets)) -%}
    {%- if cdc_delete_mode() == 'soft' -%}
        {%- call statement('cdc_apply_resets') -%}
            delete from {{ stored_relation }}
            where {{ superseded }}
        {%- endcall -%}
        {{ return(true) }}
    {%- endif -%}
    {%- set columns = cdc_state_columns() -%}
    {%- set superseded_rows -%}
        select
            {%- for name in columns %}
            {%- if name == '_cdc_op' %}
            {{ cdc_string_literal(cdc_delete_marker()) }} as _cdc_op{{ "," if not loop.last }}
            {%- else %}
            `{{ name }}`{{ "," if not loop.last }}
            {%- endif %}
            {%- endfor %}
        from {{ stored_relation }}
        where {{ superseded }}
    {%- endset -%}
    {%- do cdc_write_recent(target_relation, stored_relation, superseded_rows, primary_key, false, read_path) -%}
    {%- call statement('cdc_apply_resets') -%}
        insert into {{ stored_relation }} (`{{ columns | join('`, `') }}`)
        {{ superseded_rows }}
    {%- endcall -%}
    {{ return(true) }}
{% endmacro %}


{#- The resets as an alias-like prefix for cdc_is_superseded: a struct of literals. -#}
{% macro cdc_resets_values(resets) -%}
    named_struct(
        {%- for name, value in resets | dictsort %}
        '{{ name }}', {{ cdc_string_literal(value) }}{{ "," if not loop.last }}
        {%- endfor %}
    )
{%- endmacro %}


{#- Records the resets (and the reset groups, when given) on `target_relation` where they
    changed since the build began (`applied`, `applied_groups`), in one statement. -#}
{% macro cdc_write_resets(target_relation, resets, applied, groups=none, applied_groups=none) %}
    {%- set changed = {} -%}
    {%- if tojson(resets, sort_keys=true) != applied -%}
        {%- do changed.update({'cdc.resets': tojson(resets, sort_keys=true)}) -%}
    {%- endif -%}
    {%- if groups is not none and groups != applied_groups -%}
        {%- do changed.update({'cdc.reset_groups': groups}) -%}
    {%- endif -%}
    {%- if not changed -%}
        {{ return(none) }}
    {%- endif -%}
    {%- do cdc_set_tblproperties(target_relation, changed, 'cdc_write_resets') -%}
{% endmacro %}


{#- A Spark SQL string literal for a value that comes from data (or null). -#}
{% macro cdc_string_literal(value) -%}
    {%- if value is none -%}
        cast(null as string)
    {%- else -%}
        '{{ value | string | replace("\\", "\\\\") | replace("'", "\\'") }}'
    {%- endif -%}
{%- endmacro %}


{#- The table properties of `relation` as a dict. -#}
{% macro cdc_table_properties(relation) %}
    {%- set properties = {} -%}
    {%- for row in run_query('show tblproperties ' ~ relation) -%}
        {%- do properties.update({row[0]: row[1]}) -%}
    {%- endfor -%}
    {{ return(properties) }}
{% endmacro %}
