{#- Change events -> the rows a history (SCD type 2) build applies, each with its kind
    `_cdc_row`:

      version   one row per version of a key touched by the window: a run of the key's
                live events, in `_cdc_order`, whose row values stay the same (a replayed
                event or a re-snapshot of an unchanged row starts no new version). It is
                valid from its first event (`_cdc_order`, `_cdc_valid_from` = source
                time) until the next event that deletes the key, changes its values, or
                truncates the table (`_cdc_valid_to_order`, `_cdc_valid_to`); the open
                one `_cdc_is_current`. A value Debezium left out as unchanged TOAST
                takes the key's latest real value before it.
      rejected  as in cdc_latest_per_key.
      reset     as in cdc_latest_per_key, plus `_cdc_window_commit_time`: the newest
                bronze commit read (the watermark).

    Every version of a touched key is computed from all of its events, so a late event
    splitting or merging old versions gives what a full refresh gives. `change_events`
    must keep truncated events (cdc_change_events(..., truncated='keep')). -#}
{% macro cdc_versions(change_log, change_events, resets, watermark=none, applied=none) %}
    {%- set columns = cdc_model_columns() | rejectattr('derived') | list -%}
    {%- set primary_key = cdc_primary_key() -%}
    {%- set keys -%}{% for key in primary_key %}`{{ key }}`{{ ", " if not loop.last }}{% endfor %}{%- endset -%}
    {%- set value_columns = columns | rejectattr('name', 'in', primary_key) | list -%}
    {%- set window = cdc_history_window('resets', watermark, applied) -%}
    {%- set touched_keys -%}
        select distinct {{ keys }} from {{ change_events }} cross join {{ resets }} as resets
        where size(_cdc_invalid) = 0 and {{ window }}
    {%- endset -%}
    {#- the values a version holds: a change of any of them starts a new version -#}
    {%- set row_values -%}
        struct({% for column in value_columns %}`{{ column.name }}`{{ ", " if not loop.last }}{% endfor %})
    {%- endset -%}
    {%- if value_columns | length == 0 -%}
        {%- set row_values = 'true' -%}
    {%- endif %}
    select
        {%- for column in columns %}
        `{{ column.name }}`,
        {%- endfor %}
        _cdc_source_ts as _cdc_valid_from,
        _cdc_valid_to,
        _cdc_valid_to_order is null as _cdc_is_current,
        _cdc_op,
        _cdc_order,
        _cdc_valid_to_order,
        _cdc_commit_time,
        cast(null as string) as _cdc_window_commit_time,
        'version' as _cdc_row,
        {{ cdc_special_row_columns() }}
    from (
        select
            *,
            _cdc_next_end._cdc_order as _cdc_valid_to_order,
            _cdc_next_end._cdc_source_ts as _cdc_valid_to
        from (
            select
                *,
                -- the next event that ends a version: a delete, a truncate, other values
                first(case when _cdc_starts_version or _cdc_deleted then struct(_cdc_order, _cdc_source_ts) end, true)
                    over later_events as _cdc_next_end
            from (
                select
                    *,
                    not _cdc_deleted and (
                        coalesce(lag(_cdc_deleted) over key_events, true)
                        or not (lag({{ row_values }}) over key_events <=> {{ row_values }})
                    ) as _cdc_starts_version
                from (
                    select
                        {%- for column in columns %}
                        {%- if column.toastable %}
                        -- a struct, as the latest real value may be null
                        last_value(
                            case when not _cdc_deleted and not `_cdc_unavailable__{{ column.name }}`
                                then struct(`{{ column.name }}` as value) end,
                            true
                        ) over key_events_so_far.value as `{{ column.name }}`,
                        {%- else %}
                        `{{ column.name }}`,
                        {%- endif %}
                        {%- endfor %}
                        _cdc_op,
                        _cdc_deleted,
                        _cdc_order,
                        _cdc_source_ts,
                        _cdc_commit_time
                    from (
                        select
                            {%- for column in columns %}
                            events.`{{ column.name }}`,
                            {%- endfor %}
                            {%- for column in columns | selectattr('toastable') %}
                            events.`_cdc_unavailable__{{ column.name }}`,
                            {%- endfor %}
                            events._cdc_op,
                            events._cdc_deleted,
                            events._cdc_order,
                            events._cdc_source_ts,
                            events._cdc_commit_time
                        from {{ change_events }} as events
                        left semi join ({{ touched_keys }}) as touched
                            on {{ cdc_key_join('events', 'touched', primary_key) }}
                        where size(events._cdc_invalid) = 0

                        union all

                        -- a truncate ends every key's open version at its position
                        select
                            {{- cdc_columns_or_nulls(columns, keep=primary_key, alias='touched') }}
                            {%- for column in columns | selectattr('toastable') %}
                            true as `_cdc_unavailable__{{ column.name }}`,
                            {%- endfor %}
                            truncates._op as _cdc_op,
                            true as _cdc_deleted,
                            {{ cdc_ordering_key() }} as _cdc_order,
                            timestamp_millis(truncates._source_ts_ms) as _cdc_source_ts,
                            truncates._hoodie_commit_time as _cdc_commit_time
                        from {{ change_log }} as truncates
                        cross join {{ resets }} as resets
                        cross join ({{ touched_keys }}) as touched
                        where truncates._op = 't'
                            and not {{ cdc_is_superseded(cdc_ordering_key(), cdc_snapshot_resets('resets')) }}
                    ) as key_events
                    window key_events_so_far as (
                        partition by {{ keys }} order by _cdc_order rows between unbounded preceding and current row
                    )
                ) as events_with_values
                window key_events as (partition by {{ keys }} order by _cdc_order)
            ) as starts
            window later_events as (
                partition by {{ keys }} order by _cdc_order rows between 1 following and unbounded following
            )
        ) as ends
    ) as versions
    where _cdc_starts_version

    union all

    select
        {{- cdc_columns_or_nulls(columns, keep=primary_key) }}
        cast(null as timestamp) as _cdc_valid_from,
        cast(null as timestamp) as _cdc_valid_to,
        cast(null as boolean) as _cdc_is_current,
        _cdc_op,
        _cdc_order,
        cast(null as string) as _cdc_valid_to_order,
        _cdc_commit_time,
        cast(null as string) as _cdc_window_commit_time,
        'rejected' as _cdc_row,
        {{ cdc_special_row_columns(rejected=true) }}
    from {{ change_events }}
    cross join {{ resets }} as resets
    where size(_cdc_invalid) > 0 and {{ window }}

    union all

    select
        {{- cdc_columns_or_nulls(columns) }}
        cast(null as timestamp) as _cdc_valid_from,
        cast(null as timestamp) as _cdc_valid_to,
        cast(null as boolean) as _cdc_is_current,
        cast(null as string) as _cdc_op,
        cast(null as string) as _cdc_order,
        cast(null as string) as _cdc_valid_to_order,
        cast(null as string) as _cdc_commit_time,
        (
            select max(_cdc_commit_time) from {{ change_events }}
            cross join {{ resets }} as resets
            where {{ window }}
        ) as _cdc_window_commit_time,
        'reset' as _cdc_row,
        {{ cdc_special_row_columns(reset=true) }}
    from {{ resets }}
{% endmacro %}


{#- Which events a history build reads anew (a predicate over change events crossed
    with `resets`): those of bronze commits after `watermark`, or all of them when the
    table is built from scratch (no watermark) or its resets changed since the last
    build (`applied`, the table's cdc.resets: a new truncate or complete snapshot
    rebuilds the whole history). -#}
{% macro cdc_history_window(resets, watermark, applied) -%}
    {%- if watermark is none or applied is none -%}
        true
    {%- else -%}
        {%- set applied = fromjson(applied) -%}
        (_cdc_commit_time > {{ cdc_string_literal(watermark) }} or not (
            {%- for name, value in applied | dictsort %}
            {{ resets }}.{{ name }} <=> {{ cdc_string_literal(value) }}{{ " and" if not loop.last }}
            {%- endfor %}
        ))
    {%- endif -%}
{%- endmacro %}
