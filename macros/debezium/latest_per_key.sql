{#- Change events -> the rows a silver build applies, each with its kind `_cdc_row`:

      change    the latest event per primary key (deletes included, flagged). Row values
                come from the key's latest live (not delete) event, `_cdc_values_order`
                being its order: a delete's row image is not the row (PostgreSQL sends
                only the key), and soft-deleted rows keep their last values. A column
                whose value Debezium left out as an unchanged TOAST value takes the key's
                latest real value in the batch; if there is none, its name is listed in
                `_cdc_unavailable` and the merge keeps the stored value.
      reset     exactly one row carrying the table's resets (from cdc_resets); the
                materialization removes what they supersede.
      rejected  an event that cannot be applied (`_cdc_invalid`), with its reason
                `_cdc_rejection` and where it came from; it is left out of `change`, so
                a later valid event of the key applies normally.

    Change and rejected rows come from one aggregation, so the events are read and
    decoded once: a key's valid events form one group, each rejected event a group of
    its own (grouped by its topic, partition and offset too). -#}
{% macro cdc_latest_per_key(change_events, resets) %}
    {#- derived columns are computed by the model from this result -#}
    {%- set columns = cdc_model_columns() | rejectattr('derived') | list -%}
    {%- set primary_key = cdc_primary_key() -%}
    {%- set toastable = columns | selectattr('toastable') | list %}
    select
        {%- for column in columns %}
        {%- if column.name in primary_key %}
        `{{ column.name }}`,
        {%- elif column.toastable %}
        case when not _cdc_is_rejected then max_by(`{{ column.name }}`,
            case when not _cdc_deleted and not `_cdc_unavailable__{{ column.name }}` then _cdc_order end)
        end as `{{ column.name }}`,
        {%- else %}
        case when not _cdc_is_rejected then max_by(`{{ column.name }}`, case when not _cdc_deleted then _cdc_order end)
        end as `{{ column.name }}`,
        {%- endif %}
        {%- endfor %}
        max_by(_cdc_op, _cdc_order) as _cdc_op,
        max_by(_cdc_deleted, _cdc_order) as _cdc_deleted,
        max(_cdc_order) as _cdc_order,
        case when not _cdc_is_rejected then max(case when not _cdc_deleted then _cdc_order end)
        end as _cdc_values_order,
        max_by(_cdc_source_ts, _cdc_order) as _cdc_source_ts,
        max_by(_cdc_commit_time, _cdc_order) as _cdc_commit_time,
        -- newest bronze commit read for the key (the watermark), winning or not
        max(_cdc_commit_time) as _cdc_window_commit_time,
        {%- if toastable %}
        case when _cdc_is_rejected then cast(array() as array<string>) else filter(array(
            {%- for column in toastable %}
            case when count_if(not _cdc_deleted and not `_cdc_unavailable__{{ column.name }}`) = 0
                then '{{ column.name }}' end
            {{- "," if not loop.last }}
            {%- endfor %}
        ), name -> name is not null) end as _cdc_unavailable,
        {%- else %}
        cast(array() as array<string>) as _cdc_unavailable,
        {%- endif %}
        case when _cdc_is_rejected then 'rejected' else 'change' end as _cdc_row,
        {{ cdc_special_row_columns(rejected='grouped') }}
    from (
        select
            *,
            size(_cdc_invalid) > 0 as _cdc_is_rejected
        from {{ change_events }}
    ) as events
    group by
        {%- for key in primary_key %}
        `{{ key }}`,
        {%- endfor %}
        _cdc_is_rejected,
        -- a rejected event is a group of its own (bronze is keyed by these three)
        case when _cdc_is_rejected then _cdc_topic end,
        case when _cdc_is_rejected then _cdc_partition end,
        case when _cdc_is_rejected then _cdc_offset end

    union all

    select
        {{- cdc_columns_or_nulls(columns) }}
        cast(null as string) as _cdc_op,
        false as _cdc_deleted,
        cast(null as string) as _cdc_order,
        cast(null as string) as _cdc_values_order,
        cast(null as timestamp) as _cdc_source_ts,
        cast(null as string) as _cdc_commit_time,
        cast(null as string) as _cdc_window_commit_time,
        cast(array() as array<string>) as _cdc_unavailable,
        'reset' as _cdc_row,
        {{ cdc_special_row_columns(reset=true) }}
    from {{ resets }}
{% endmacro %}


{#- The columns only `reset` and `rejected` rows fill (null elsewhere). `rejected`: false
    (nulls), true (the event's own values) or 'grouped' (in cdc_latest_per_key's
    aggregation, where a rejected event is a group of its own: max is its value). -#}
{% macro cdc_special_row_columns(reset=false, rejected=false) -%}
    {%- for name in ['_cdc_truncated_before', '_cdc_snapshot_position', '_cdc_snapshot_offsets',
            '_cdc_reset_groups'] %}
    {{ name if reset else 'cast(null as string) as ' ~ name }},
    {%- endfor %}
    {%- for value, name, data_type in [
            ("array_join(_cdc_invalid, '; ')", '_cdc_rejection', 'string'),
            ('_cdc_topic', '_cdc_topic', 'string'),
            ('_cdc_partition', '_cdc_partition', 'int'),
            ('_cdc_offset', '_cdc_offset', 'bigint'),
            ('_cdc_source_file', '_cdc_source_file', 'string'),
            ('_cdc_source_line', '_cdc_source_line', 'int')] %}
    {%- if rejected == 'grouped' %}
    case when _cdc_is_rejected then max({{ value }}) end as {{ name }}
    {%- elif rejected %}
    {{ value }} as {{ name }}
    {%- else %}
    cast(null as {{ data_type }}) as {{ name }}
    {%- endif %}{{ "," if not loop.last }}
    {%- endfor %}
{%- endmacro %}
