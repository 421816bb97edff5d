{#- Debezium's value encodings -> real Spark values. `raw` is a SQL expression holding the
    value's JSON text (as `get_json_object` returns it). -#}

{#- Debezium sends this in place of an unchanged TOASTed value (text, bytea, arrays). -#}
{% macro cdc_is_unavailable(raw) -%}
    ({{ raw }} in (
        '__debezium_unavailable_value',
        '["__debezium_unavailable_value"]',
        'X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=='
    ))
{%- endmacro %}


{% macro cdc_decode_value(raw, data_type, encoding=none) -%}
    {%- if data_type.startswith('decimal') -%}
        {%- set precision, scale = modules.re.findall('[0-9]+', data_type) -%}
        {%- set mode = encoding or var('cdc_decimal_handling_mode', 'precise') -%}
        {%- if mode == 'precise' -%}
            {{ cdc_decode_decimal(raw, precision, scale) }}
        {%- elif mode in ['string', 'double'] -%}
            cast({{ raw }} as {{ data_type }})
        {%- else -%}
            {{ exceptions.raise_compiler_error(
                "Unknown decimal encoding '" ~ mode ~ "'. Use precise, string or double "
                ~ "(Debezium's decimal.handling.mode).") }}
        {%- endif -%}
    {%- elif data_type == 'date' -%}
        {#- io.debezium.time.Date: days since the epoch; also accept ISO dates -#}
        case
            when {{ raw }} rlike '^-?[0-9]+$' then date_add(date '1970-01-01', cast({{ raw }} as int))
            else cast({{ raw }} as date)
        end
    {%- elif data_type == 'timestamp' -%}
        {#- Numbers: io.debezium.time.MicroTimestamp unless the column's meta says
            debezium_encoding: millis (Timestamp) or nanos (NanoTimestamp). Strings:
            ZonedTimestamp / ISO-8601. -#}
        {%- set unit = encoding or 'micros' -%}
        case
            when {{ raw }} rlike '^-?[0-9]+$' then
            {%- if unit == 'millis' %} timestamp_millis(cast({{ raw }} as bigint))
            {%- elif unit == 'micros' %} timestamp_micros(cast({{ raw }} as bigint))
            {%- elif unit == 'nanos' %} timestamp_micros(div(cast({{ raw }} as bigint), 1000))
            {%- else %}{{ exceptions.raise_compiler_error(
                "Unknown timestamp encoding '" ~ unit ~ "'. Use millis, micros or nanos.") }}
            {%- endif %}
            else cast({{ raw }} as timestamp)
        end
    {%- elif cdc_range_bound_type(data_type) is not none -%}
        {{ cdc_decode_range(raw, cdc_range_bound_type(data_type)) }}
    {%- elif data_type.startswith('array') -%}
        from_json({{ raw }}, '{{ data_type }}')
    {%- elif data_type == 'binary' -%}
        {#- binary.handling.mode=bytes: base64 text -#}
        unbase64({{ raw }})
    {%- elif cdc_storage_type(data_type) != data_type -%}
        cast(cast({{ raw }} as {{ data_type }}) as {{ cdc_storage_type(data_type) }})
    {%- else -%}
        cast({{ raw }} as {{ data_type }})
    {%- endif -%}
{%- endmacro %}


{#- org.apache.kafka.connect.data.Decimal (decimal.handling.mode=precise): base64 of the
    big-endian two's-complement unscaled value; the scale comes from the column type. -#}
{% macro cdc_decode_decimal(raw, precision, scale) -%}
    {%- set bytes = 'unbase64(' ~ raw ~ ')' -%}
    {%- set byte_at = 'cast(conv(hex(substr(' ~ bytes ~ ', i, 1)), 16, 10) as int)' -%}
    cast(concat(cast(
        case
            when hex(substr({{ bytes }}, 1, 1)) >= '80'
                then -1 - aggregate(sequence(1, length({{ bytes }})), cast(0 as decimal(38, 0)),
                    (acc, i) -> cast(acc * 256 + (255 - {{ byte_at }}) as decimal(38, 0)))
            else aggregate(sequence(1, length({{ bytes }})), cast(0 as decimal(38, 0)),
                (acc, i) -> cast(acc * 256 + {{ byte_at }} as decimal(38, 0)))
        end as string), 'E-{{ scale }}') as decimal({{ precision }}, {{ scale }}))
{%- endmacro %}


{#- PostgreSQL range types (tsrange, tstzrange, daterange, int4range, int8range, numrange):
    Debezium sends PostgreSQL's text form, e.g. ["2005-05-24 22:53:30","2005-05-26 22:04:30"),
    `empty`, or an unbounded side left empty: ["2005-05-24 22:53:30",). Decoded to
    struct<lower, upper, lower_inclusive, upper_inclusive, is_empty>, like PostgreSQL's
    lower(), upper(), lower_inc(), upper_inc(), isempty(): an unbounded side has a null
    bound and is exclusive; `empty` has null bounds and is_empty = true. A bound of
    `infinity` / `-infinity` has no Spark value: null too. tstzrange bounds carry their
    UTC offset (e.g. +00) and become the UTC instant. -#}
{% macro cdc_decode_range(raw, bound_type) -%}
    {%- set body = 'substr(' ~ raw ~ ', 2, length(' ~ raw ~ ') - 2)' -%}
    {#- two bounds, each "quoted" or bare, split at the comma outside quotes -#}
    {%- set pattern = "'^(\"[^\"]*\"|[^\",]*),(\"[^\"]*\"|[^\",]*)$'" -%}
    case
        when {{ raw }} = 'empty' then named_struct(
            'lower', cast(null as {{ bound_type }}),
            'upper', cast(null as {{ bound_type }}),
            'lower_inclusive', false,
            'upper_inclusive', false,
            'is_empty', true
        )
        when left({{ raw }}, 1) in ('[', '(') and right({{ raw }}, 1) in (']', ')')
            and {{ body }} rlike {{ pattern }} then named_struct(
            'lower', {{ cdc_decode_range_bound('regexp_extract(' ~ body ~ ', ' ~ pattern ~ ', 1)', bound_type) }},
            'upper', {{ cdc_decode_range_bound('regexp_extract(' ~ body ~ ', ' ~ pattern ~ ', 2)', bound_type) }},
            'lower_inclusive', left({{ raw }}, 1) = '[',
            'upper_inclusive', right({{ raw }}, 1) = ']',
            'is_empty', false
        )
    end
{%- endmacro %}


{#- One bound of a range's text form: unquoted, empty (unbounded) or +-infinity -> null. -#}
{% macro cdc_decode_range_bound(token, bound_type) -%}
    case
        when replace({{ token }}, '"', '') in ('', 'infinity', '-infinity') then null
        else cast(replace({{ token }}, '"', '') as {{ bound_type }})
    end
{%- endmacro %}
