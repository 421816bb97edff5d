{#- Strategy (hard deletes): the batch's changes (the latest event per key, deletes
    included) go into the state table in one Hudi upsert, a deleted key as a row flagged
    `_cdc_deleted` with its values nulled. Hudi's event-time ordering on `_cdc_order`
    keeps, for each key, the newer of the stored and the incoming event, so a late or
    replayed event changes nothing, a late delete removes nothing newer, and a deleted
    key stays deleted against any older event: no lookup of the stored rows is needed.
    Columns are listed (never `*`, which would drag in Hudi's `_hoodie_*` meta columns).
    Only columns some change left unavailable (Debezium's unchanged-TOAST placeholder)
    are read from the stored rows, for the keys that have them. The rows go to the
    view's recent table first, in the build's generation `read_path` (read_path.sql);
    `max_order` is the newest `_cdc_order` the state table holds (its cdc.max_order,
    none if unknown). Returns the build's result text and the newest `_cdc_order` after
    it. -#}
{% macro cdc_merge(target_relation, state_relation, batch, primary_key, max_order, read_path) %}
    {%- set columns = cdc_model_columns() | map(attribute='name') | list -%}
    {%- set changes = cdc_batch_changes(batch) -%}
    {%- if changes.count > 0 -%}
        {%- set rows_sql -%}
            select {{ cdc_state_values(columns, primary_key, 'change') }}
            from (
                select
                    {%- for name in columns %}
                    {%- if name in changes.unavailable %}
                    case
                        when array_contains(batch._cdc_unavailable, '{{ name }}') then stored.`{{ name }}`
                        else batch.`{{ name }}`
                    end as `{{ name }}`,
                    {%- else %}
                    batch.`{{ name }}`,
                    {%- endif %}
                    {%- endfor %}
                    {%- for name in cdc_metadata_columns() %}
                    batch.{{ name }},
                    {%- endfor %}
                    batch._cdc_deleted
                from {{ batch }} as batch
                {%- if changes.unavailable %}
                left join {{ state_relation }} as stored
                    on {{ cdc_key_join('batch', 'stored', primary_key) }}
                {%- endif %}
                where batch._cdc_row = 'change'
            ) as change
        {%- endset -%}
        {%- do cdc_write_recent(target_relation, state_relation, rows_sql, primary_key,
            max_order is none or changes.oldest <= max_order, read_path) -%}
        {%- call statement('cdc_upsert_state') -%}
            insert into {{ state_relation }} (`{{ cdc_state_columns() | join('`, `') }}`)
            {{ rows_sql }}
        {%- endcall -%}
    {%- endif -%}
    {%- set newest = [max_order, changes.newest] | max if max_order is not none and changes.count > 0
        else max_order -%}
    {{ return(['changes=' ~ changes.count ~ ' deletes=' ~ changes.deletes, newest]) }}
{% endmacro %}


{#- The batch's changes in one query: how many (`count`), how many of them deletes
    (`deletes`), and the names of the columns for which some live change has no value,
    only Debezium's unchanged-TOAST placeholder (`unavailable`, from `_cdc_unavailable`):
    only these take the stored value, so the upsert reads no other column of the state
    table, and none at all when the list is empty. A delete's values are never written
    (`_cdc_unavailable` names every column of a key whose events are all deletes), so
    deletes are left out of it. The names come back as JSON text, whatever they hold. -#}
{% macro cdc_batch_changes(batch) %}
    {%- set row = run_query(
        'select count(*), count_if(_cdc_deleted), to_json(array_sort(array_distinct(flatten(collect_list('
        ~ 'case when not coalesce(_cdc_deleted, false) then _cdc_unavailable end))))), '
        ~ 'min(_cdc_order), max(_cdc_order) from ' ~ batch
        ~ " where _cdc_row = 'change'").rows[0] -%}
    {{ return({'count': row[0], 'deletes': row[1], 'unavailable': fromjson(row[2]),
        'oldest': row[3], 'newest': row[4]}) }}
{% endmacro %}


{#- How silver takes a batch: Hudi's INSERT INTO as an upsert, with Hudi's Spark-native
    record merger; with `deletes` = 'hard' it also deletes the rows whose `_cdc_op` holds
    the delete marker (the rows a reset supersedes: cdc_apply_resets). A MERGE INTO goes through Hudi's per-row Avro payload, which the
    upsert skips for the same table row by row (docs/decisions/silver-upsert.md). No
    de-duplication before it: the batch holds one change per key (cdc_latest_per_key
    groups by the key), so Hudi's shuffle that would combine duplicates finds none and
    only costs (docs/decisions/silver-upsert.md). Table properties, not session settings: dbt's
    threads share one Spark session. A `partitioned` table keeps Hudi's default (Avro)
    merger: the Spark-native one fails, or crashes the JVM, when a late event loses
    against a row stored in another partition (docs/decisions/silver-partitioned-global-index.md). -#}
{% macro cdc_upsert_properties(deletes, partitioned=false) %}
    {%- set properties = {'hoodie.spark.sql.insert.into.operation': 'upsert'} -%}
    {%- if not partitioned -%}
        {%- do properties.update({
            'hoodie.write.record.merge.custom.implementation.classes': 'org.apache.hudi.DefaultSparkRecordMerger',
        }) -%}
    {%- endif -%}
    {%- do properties.update({'hoodie.combine.before.upsert': 'false'}) -%}
    {%- if deletes == 'hard' -%}
        {#- the build compacts after publishing its rows (cdc_publish_build), never inside
            the upsert, whose compaction would show readers part of the build -#}
        {%- do properties.update({
            'hoodie.payload.delete.field': '_cdc_op',
            'hoodie.payload.delete.marker': cdc_delete_marker(),
            'hoodie.compact.inline': 'false',
        }) -%}
    {%- endif -%}
    {{ return(properties) }}
{% endmacro %}


{#- The `_cdc_op` of a row the upsert deletes: never an op of a stored row (the
    ingestion lands only c, u, d, r and t). -#}
{% macro cdc_delete_marker() %}
    {{ return('_cdc_delete') }}
{% endmacro %}


{#- Gives silver cdc_upsert_properties before a merge strategy upserts into it (without
    them INSERT INTO would add rows): once for a table built by a full refresh (created
    without them, as its CTAS is much slower with them: docs/decisions/silver-upsert.md) or
    before they existed. `stored`: the table's properties as read when the build began. -#}
{% macro cdc_ensure_upsert_properties(target_relation, stored) %}
    {%- set wanted = cdc_upsert_properties(cdc_delete_mode(), cdc_partition_by() | length > 0) -%}
    {%- set missing = {} -%}
    {%- for name, value in wanted.items() if stored.get(name) != value -%}
        {%- do missing.update({name: value}) -%}
    {%- endfor -%}
    {%- if missing -%}
        {%- do cdc_set_tblproperties(target_relation, missing, 'cdc_upsert_properties') -%}
    {%- endif -%}
{% endmacro %}
