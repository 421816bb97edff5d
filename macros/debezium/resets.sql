{#- Resets: events that empty a table or replace its whole contents, and what they
    supersede. Computed over the whole change log (not the incremental window), so an
    incremental and a full-refresh build apply the same rules.

      truncate (op = 't')       every event ordered before the newest truncate is
                                superseded (TRUNCATE takes an exclusive lock in the
                                source, so no change before it can commit after it)
      complete snapshot         the newest snapshot whose end Debezium marked (source
                                snapshot = 'last' or 'last_in_data_collection'), e.g. a
                                re-snapshot after a connector reset: an event older than
                                the snapshot in the source log AND earlier in its Kafka
                                partition than the snapshot's records there is superseded.
                                Changes committed during the snapshot come after it in
                                the topic and are kept even if their log position is older.

    One row: _cdc_truncated_before (an ordering key), _cdc_snapshot_position (the source
    log position part of an ordering key) and _cdc_snapshot_offsets ('partition:offset,...',
    the snapshot's last offset per Kafka partition); each null when there is none. -#}
{% macro cdc_resets(change_log, stored_groups=none) %}
    {#- one scan of the change log: the t/r events grouped by source position and Kafka
        partition, then one row from those few groups. `stored_groups` (the groups of the
        table's earlier builds, from `_cdc_reset_groups`): `change_log` is only the
        window, and its groups are merged with them (every figure of a group is a max). -#}
    select
        max(truncated_before) as _cdc_truncated_before,
        max(snapshot_position) as _cdc_snapshot_position,
        nullif(array_join(array_sort(collect_list(
            case
                when position = snapshot_position
                    then concat(cast(_partition as string), ':', cast(last_offset as string))
            end
        )), ','), '') as _cdc_snapshot_offsets,
        -- the groups a later build still needs: the newest truncate's, and those of
        -- snapshots at or after the newest complete one (one may complete later)
        to_json(array_sort(collect_list(
            case
                when truncated_before = newest_truncate
                    or (last_offset is not null and position >= coalesce(snapshot_position, ''))
                    then named_struct(
                        'position', position,
                        'partition', _partition,
                        'truncated_before', truncated_before,
                        'complete_snapshot_position', complete_snapshot_position,
                        'last_offset', last_offset
                    )
            end
        ))) as _cdc_reset_groups
    from (
        select
            *,
            max(complete_snapshot_position) over () as snapshot_position,
            max(truncated_before) over () as newest_truncate
        from (
            select
                position,
                _partition,
                max(truncated_before) as truncated_before,
                max(complete_snapshot_position) as complete_snapshot_position,
                max(last_offset) as last_offset
            from (
                select
                    {{ cdc_source_position(cdc_ordering_key()) }} as position,
                    _partition,
                    max(case when _op = 't' then {{ cdc_ordering_key() }} end) as truncated_before,
                    max(case when _op = 'r' and _source_snapshot in ('last', 'last_in_data_collection')
                        then {{ cdc_source_position(cdc_ordering_key()) }} end) as complete_snapshot_position,
                    max(case when _op = 'r' and coalesce(_source_snapshot, '') not in ('false', 'incremental')
                        then _offset end) as last_offset
                from {{ change_log }}
                where _op in ('t', 'r')
                    {%- if cdc_ignores_deletes() %}
                    -- cdc_deletes: ignore (an insert-only log): nothing is superseded
                    and false
                    {%- endif %}
                group by 1, 2
                {%- for group in stored_groups or [] %}
                union all
                select
                    {#- to_json leaves null fields out: a missing field is null -#}
                    {{ cdc_string_literal(group.get('position')) }},
                    cast({{ cdc_string_literal(group.get('partition')) }} as int),
                    {{ cdc_string_literal(group.get('truncated_before')) }},
                    {{ cdc_string_literal(group.get('complete_snapshot_position')) }},
                    cast({{ cdc_string_literal(group.get('last_offset')) }} as bigint)
                {%- endfor %}
            ) as window_and_stored_groups
            group by position, _partition
        ) as reset_groups
    ) as reset_groups_with_snapshot
{% endmacro %}


{#- The source log position part of an ordering key (LSN; binlog file, position). -#}
{% macro cdc_source_position(order) -%}
    substring_index({{ order }}, '|', 3)
{%- endmacro %}


{#- True when the event or stored row with ordering key `order` is superseded by the
    resets in `resets` (a relation alias or a row of literals from cdc_resets). -#}
{% macro cdc_is_superseded(order, resets) -%}
    (coalesce({{ order }} < {{ resets }}._cdc_truncated_before, false)
        or coalesce(
            {{ cdc_source_position(order) }} < {{ resets }}._cdc_snapshot_position
            and cast(element_at(split({{ order }}, '[|]'), 6) as bigint) < cast(try_element_at(
                str_to_map({{ resets }}._cdc_snapshot_offsets, ',', ':'),
                cast(cast(element_at(split({{ order }}, '[|]'), 5) as int) as string)
            ) as bigint),
            false
        ))
{%- endmacro %}


{#- The resets of relation alias `resets` without its truncate: what only a complete
    snapshot supersedes (history tables keep the events before a truncate). -#}
{% macro cdc_snapshot_resets(resets) -%}
    named_struct(
        '_cdc_truncated_before', cast(null as string),
        '_cdc_snapshot_position', {{ resets }}._cdc_snapshot_position,
        '_cdc_snapshot_offsets', {{ resets }}._cdc_snapshot_offsets
    )
{%- endmacro %}
