{#- Bronze change-log rows (either record shape) -> one change-event shape: the model's
    columns (but `meta.cdc_derived` ones) decoded to Spark types, plus
      _cdc_op          c/u/d/r as Debezium sent it
      _cdc_deleted     the event deletes its key (envelope op=d, flattened __deleted=true)
      _cdc_order       the key's event order: source log position (Postgres LSN; MySQL
                       binlog file, position, row), then topic partition and offset.
                       Never ts_ms: it ties inside a transaction.
      _cdc_source_ts   when the change was made in the source database
      _cdc_commit_time the bronze (Hudi) commit that landed the event
      _cdc_unavailable__<col>  (variable-length columns) Debezium sent its unchanged-TOAST
                       placeholder instead of the value
      _cdc_invalid     why the event cannot be applied (a value that does not decode
                       to its column's type, a null key): empty when it can
      _cdc_topic, _cdc_partition, _cdc_offset, _cdc_source_file, _cdc_source_line
                       where the event came from, for rejected events
    Events superseded by a truncate or a complete snapshot (`resets`, from cdc_resets)
    are left out, and so are truncate events themselves: they carry no row. With
    truncated='keep' (history tables) events before a truncate stay: the truncate
    closes their versions instead of erasing them (see cdc_versions). -#}
{% macro cdc_change_events(change_log, resets, truncated='drop') %}
    {%- if truncated not in ['drop', 'keep'] -%}
        {{ exceptions.raise_compiler_error(
            "cdc_change_events: truncated is '" ~ truncated ~ "'. Use 'drop' (current-state tables) or "
            ~ "'keep' (history tables).") }}
    {%- endif -%}
    {%- set superseding = 'resets' if truncated == 'drop' else cdc_snapshot_resets('resets') -%}
    {#- derived columns are not in the event: the model computes them afterwards -#}
    {%- set columns = cdc_model_columns() | rejectattr('derived') | list -%}
    {%- set primary_key = cdc_primary_key() %}
    select
        *,
        -- what makes the event unusable; a delete's non-key columns are not row values
        filter(array(
            {%- for column in columns %}
            {%- if column.name in primary_key %}
            case
                when `{{ column.name }}` is not null then null
                when `_cdc_present__{{ column.name }}` then {{ cdc_invalid_value_reason(column) }}
                else 'primary key column {{ column.name }} is missing or null'
            end{{ "," if not loop.last }}
            {%- else %}
            case
                when `_cdc_present__{{ column.name }}` and `{{ column.name }}` is null and not _cdc_deleted
                    then {{ cdc_invalid_value_reason(column) }}
            end{{ "," if not loop.last }}
            {%- endif %}
            {%- endfor %}
        ), reason -> reason is not null) as _cdc_invalid
    from (
        select
            {%- for column in columns %}
            {%- set raw = '_cdc_values[' ~ "'" ~ column.name ~ "'" ~ ']' %}
            {%- if column.toastable %}
            case when {{ cdc_is_unavailable(raw) }} then null
                else {{ cdc_decode_value(raw, column.declared_type, column.encoding) }}
            end as `{{ column.name }}`,
            coalesce({{ cdc_is_unavailable(raw) }}, false) as `_cdc_unavailable__{{ column.name }}`,
            {{ raw }} is not null and not {{ cdc_is_unavailable(raw) }} as `_cdc_present__{{ column.name }}`,
            {%- else %}
            {{ cdc_decode_value(raw, column.declared_type, column.encoding) }} as `{{ column.name }}`,
            {{ raw }} is not null as `_cdc_present__{{ column.name }}`,
            {%- endif %}
            {%- endfor %}
            _op as _cdc_op,
            coalesce(_deleted, false) as _cdc_deleted,
            {{ cdc_ordering_key() }} as _cdc_order,
            timestamp_millis(_source_ts_ms) as _cdc_source_ts,
            _hoodie_commit_time as _cdc_commit_time,
            _cdc_values,
            _topic as _cdc_topic,
            _partition as _cdc_partition,
            _offset as _cdc_offset,
            _source_file as _cdc_source_file,
            _source_line as _cdc_source_line
        from (
            select
                *,
                -- a delete's row image is `before` in the envelope, the row itself when flattened
                from_json(
                    case when _shape = 'envelope' and coalesce(_deleted, false) then _before else _after end,
                    'map<string,string>'
                ) as _cdc_values
            from {{ change_log }}
            cross join {{ resets }} as resets
            where (_op is null or _op != 't')
                and not {{ cdc_is_superseded(cdc_ordering_key(), superseding) }}
                {%- if cdc_ignores_deletes() %}
                -- cdc_deletes: ignore (an insert-only log): a delete removes nothing
                and not coalesce(_deleted, false)
                {%- endif %}
        ) as events_with_values
    ) as decoded_events
{% endmacro %}


{#- Why a present value did not decode to its column's type (quoted, cut at 100 chars). -#}
{% macro cdc_invalid_value_reason(column) -%}
    concat('column {{ column.name }}: "', left(_cdc_values['{{ column.name }}'], 100),
        '" is not a valid {{ column.declared_type }}')
{%- endmacro %}


{#- A string that sorts like (source log position, partition, offset). Fixed-width,
    zero-padded parts so that string order is numeric order. -#}
{% macro cdc_ordering_key() -%}
    concat_ws('|',
        lpad(coalesce(cast(_source_lsn as string), ''), 20, '0'),
        coalesce(_source_binlog_file, ''),
        lpad(coalesce(cast(_source_binlog_pos as string), ''), 20, '0'),
        lpad(coalesce(cast(_source_binlog_row as string), ''), 10, '0'),
        lpad(cast(_partition as string), 10, '0'),
        lpad(cast(_offset as string), 20, '0')
    )
{%- endmacro %}
