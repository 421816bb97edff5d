{#- Strategy: delete-aware merge of the batch (latest change per key) into silver.

    Each batch row is compared with the key's stored state (live row or tombstone) and
    given one action:
      skip       not newer than what is stored (late or replayed event)
      delete     a delete of a live row
      tombstone  a delete of a key that has no live row (remember it)
      update     a newer row image of a live row
      insert     a new key, or a key re-inserted after its delete
    Silver then takes its inserts, updates and deletes in one Hudi upsert (see
    cdc_upsert_properties); the tombstones take theirs in a MERGE whose clauses are made
    mutually exclusive on the precomputed action, as Hudi evaluates MERGE clauses its own
    way. Columns are listed (never `*`, which would drag in Hudi's `_hoodie_*` meta
    columns). -#}
{% macro cdc_merge(target_relation, tombstone_relation, batch, primary_key) %}
    {%- set columns = cdc_model_columns() -%}
    {%- set silver_columns = cdc_silver_columns() -%}
    {%- set first_key = primary_key[0] -%}
    {%- set unavailable = cdc_batch_unavailable_columns(batch) -%}

    {%- set actions_sql -%}
        select
            {%- for column in columns %}
            {%- if column.name in unavailable %}
            case
                when array_contains(batch._cdc_unavailable, '{{ column.name }}') then stored.`{{ column.name }}`
                else batch.`{{ column.name }}`
            end as `{{ column.name }}`,
            {%- else %}
            batch.`{{ column.name }}`,
            {%- endif %}
            {%- endfor %}
            batch._cdc_op,
            batch._cdc_order,
            batch._cdc_source_ts,
            batch._cdc_commit_time,
            tombstone.`{{ first_key }}` is not null as _cdc_has_tombstone,
            case
                when batch._cdc_order <= coalesce(greatest(stored._cdc_order, tombstone._cdc_order), '') then 'skip'
                when batch._cdc_deleted and stored.`{{ first_key }}` is not null then 'delete'
                when batch._cdc_deleted then 'tombstone'
                when stored.`{{ first_key }}` is not null then 'update'
                else 'insert'
            end as _cdc_action
        from {{ batch }} as batch
        left join {{ target_relation }} as stored
            on {{ cdc_key_join('batch', 'stored', primary_key) }}
        left join {{ tombstone_relation }} as tombstone
            on {{ cdc_key_join('batch', 'tombstone', primary_key) }}
        where batch._cdc_row = 'change'
    {%- endset -%}
    {%- set actions = cdc_create_work_table(target_relation, 'actions', actions_sql) -%}

    {%- set counts = {} -%}
    {%- for row in run_query(
            'select _cdc_action, _cdc_has_tombstone, count(*) from ' ~ actions ~ ' group by 1, 2') -%}
        {%- set name = row[0] ~ ('+tombstone' if row[1] else '') -%}
        {%- do counts.update({name: row[2]}) -%}
    {%- endfor -%}
    {%- set changes_silver = counts.get('insert', 0) + counts.get('insert+tombstone', 0) + counts.get('update', 0)
        + counts.get('delete', 0) -%}
    {%- set changes_tombstones = counts.get('insert+tombstone', 0) + counts.get('delete', 0)
        + counts.get('tombstone', 0) + counts.get('tombstone+tombstone', 0) -%}

    {%- if changes_silver > 0 -%}
        {%- call statement('cdc_upsert_silver') -%}
            insert into {{ target_relation }}
                ({% for name in silver_columns %}`{{ name }}`{{ ", " if not loop.last }}{% endfor %})
            select
                {%- for name in silver_columns %}
                {%- if name == '_cdc_op' %}
                case when _cdc_action = 'delete' then {{ cdc_string_literal(cdc_delete_marker()) }} else _cdc_op end
                    as _cdc_op{{ "," if not loop.last }}
                {%- else %}
                `{{ name }}`{{ "," if not loop.last }}
                {%- endif %}
                {%- endfor %}
            from {{ actions }}
            where _cdc_action in ('insert', 'update', 'delete')
        {%- endcall -%}
    {%- endif -%}

    {%- if changes_tombstones > 0 -%}
        {%- call statement('cdc_merge_tombstones') -%}
            merge into {{ tombstone_relation }} as tombstone
            using (
                select {{ cdc_tombstone_columns(primary_key, 'change') }}, change._cdc_action
                from {{ actions }} as change
                where change._cdc_action in ('delete', 'tombstone')
                    or (change._cdc_action = 'insert' and change._cdc_has_tombstone)
            ) as change
            on {{ cdc_key_join('tombstone', 'change', primary_key) }}
            when matched and change._cdc_action = 'insert' then delete
            when matched and change._cdc_action in ('delete', 'tombstone') then update set
                {%- for key in primary_key %}
                `{{ key }}` = change.`{{ key }}`,
                {%- endfor %}
                _cdc_order = change._cdc_order,
                _cdc_deleted_at = change._cdc_deleted_at,
                _cdc_commit_time = change._cdc_commit_time
            when not matched and change._cdc_action in ('delete', 'tombstone') then insert
                ({% for key in primary_key %}`{{ key }}`, {% endfor %}_cdc_order, _cdc_deleted_at, _cdc_commit_time)
                values ({% for key in primary_key %}change.`{{ key }}`, {% endfor %}change._cdc_order,
                    change._cdc_deleted_at, change._cdc_commit_time)
        {%- endcall -%}
    {%- endif -%}

    {%- do cdc_drop_work_table(actions) -%}
    {{ return(counts | dictsort | map('join', '=') | join(' ')) }}
{% endmacro %}


{#- The names of the columns for which some live change in `batch` has no value, only
    Debezium's unchanged-TOAST placeholder (`_cdc_unavailable`): only these take the
    stored value, so the actions' join reads no other variable-length column of silver
    (its widest ones, which made the actions table slow to build with wide rows:
    docs/decisions/silver-upsert.md). A delete's values are never written
    (`_cdc_unavailable` names every column of a key whose events are all deletes), so
    deletes are left out. -#}
{% macro cdc_batch_unavailable_columns(batch) %}
    {{ return(run_query(
        'select distinct unavailable._cdc_column_name from ' ~ batch ~ ' as batch'
        ~ ' lateral view explode(batch._cdc_unavailable) unavailable as _cdc_column_name'
        ~ " where batch._cdc_row = 'change' and not coalesce(batch._cdc_deleted, false)"
    ).columns[0].values() | list) }}
{% endmacro %}


{#- How silver takes a batch: Hudi's INSERT INTO as an upsert, with Hudi's Spark-native
    record merger; with `deletes` = 'hard' it also deletes the rows whose `_cdc_op` holds
    the delete marker. A MERGE INTO goes through Hudi's per-row Avro payload, which the
    upsert skips for the same table row by row (docs/decisions/silver-upsert.md). No
    de-duplication before it: the batch holds one change per key (cdc_latest_per_key
    groups by the key), so Hudi's shuffle that would combine duplicates finds none and
    only costs (docs/decisions/silver-upsert.md). Table properties, not session settings: dbt's
    threads share one Spark session. -#}
{% macro cdc_upsert_properties(deletes) %}
    {%- set properties = {
        'hoodie.spark.sql.insert.into.operation': 'upsert',
        'hoodie.write.record.merge.custom.implementation.classes': 'org.apache.hudi.DefaultSparkRecordMerger',
        'hoodie.combine.before.upsert': 'false',
    } -%}
    {%- if deletes == 'hard' -%}
        {%- do properties.update({
            'hoodie.payload.delete.field': '_cdc_op',
            'hoodie.payload.delete.marker': cdc_delete_marker(),
        }) -%}
    {%- endif -%}
    {{ return(properties) }}
{% endmacro %}


{#- The `_cdc_op` of a row the upsert deletes: never an op of a stored row (the
    ingestion lands only c, u, d, r and t; a row whose event says d but does not delete,
    a contradictory flattened record, is kept as it is). -#}
{% macro cdc_delete_marker() %}
    {{ return('_cdc_delete') }}
{% endmacro %}


{#- Gives silver cdc_upsert_properties before a merge strategy upserts into it (without
    them INSERT INTO would add rows): once for a table built by a full refresh (created
    without them, as its CTAS is much slower with them: docs/decisions/silver-upsert.md) or
    before they existed. `stored`: the table's properties as read when the build began. -#}
{% macro cdc_ensure_upsert_properties(target_relation, stored) %}
    {%- set wanted = cdc_upsert_properties(cdc_delete_mode()) -%}
    {%- set missing = [] -%}
    {%- for name, value in wanted.items() if stored.get(name) != value -%}
        {%- do missing.append(name) -%}
    {%- endfor -%}
    {%- if missing -%}
        {%- call statement('cdc_upsert_properties') -%}
            alter table {{ target_relation }} set tblproperties (
                {%- for name in missing %}
                '{{ name }}' = {{ cdc_string_literal(wanted[name]) }}{{ "," if not loop.last }}
                {%- endfor %}
            )
        {%- endcall -%}
    {%- endif -%}
{% endmacro %}
