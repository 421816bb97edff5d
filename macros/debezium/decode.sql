{#- Debezium's value encodings -> real Spark values. `raw` is a SQL expression holding the
    value's JSON text (as `get_json_object` returns it). A value that is not an exact
    representation of the declared type decodes to null, so its event is rejected:
    Spark's cast alone would truncate "1.9" to 1, read "yes" as true, "1e400" as
    Infinity, round a decimal and take "2020-01-01 junk" as a date. -#}

{#- Debezium sends this in place of an unchanged TOASTed value (text, bytea, arrays). -#}
{% macro cdc_is_unavailable(raw) -%}
    ({{ raw }} in (
        '__debezium_unavailable_value',
        '["__debezium_unavailable_value"]',
        'X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=='
    ))
{%- endmacro %}


{% macro cdc_decode_value(raw, data_type, encoding=none) -%}
    {%- set number = "'^-?(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]+)?$'" -%}
    {%- if data_type.startswith('decimal') -%}
        {%- set precision, scale = modules.re.findall('[0-9]+', data_type) -%}
        {%- set mode = encoding or var('cdc_decimal_handling_mode', 'precise') -%}
        {%- if mode == 'precise' -%}
            case when {{ raw }} != '' and {{ cdc_is_base64(raw) }} then {{ cdc_decode_decimal(raw, precision, scale) }} end
        {%- elif mode == 'string' -%}
            {#- plain text: digits past the scale may only be zeros, else rounding would change the value -#}
            case
                when {{ raw }} rlike '^-?[0-9]+([.][0-9]+)?$'
                    and trim(trailing '0' from substr(regexp_extract({{ raw }}, '[.]([0-9]+)$', 1), {{ scale }} + 1)) = ''
                    then try_cast({{ raw }} as {{ data_type }})
            end
        {%- elif mode == 'double' -%}
            {#- a double: kept when the declared decimal holds the very same double -#}
            case
                when {{ raw }} rlike {{ number }}
                    and try_cast(try_cast({{ raw }} as {{ data_type }}) as double) = try_cast({{ raw }} as double)
                    then try_cast({{ raw }} as {{ data_type }})
            end
        {%- else -%}
            {{ exceptions.raise_compiler_error(
                "Unknown decimal encoding '" ~ mode ~ "'. Use precise, string or double "
                ~ "(Debezium's decimal.handling.mode).") }}
        {%- endif -%}
    {%- elif data_type == 'date' -%}
        {#- io.debezium.time.Date: days since the epoch; also ISO dates; within Spark's years 1-9999 -#}
        case
            when {{ raw }} rlike '^-?[0-9]+$' and try_cast({{ raw }} as int) between -719162 and 2932896
                then date_add(date '1970-01-01', try_cast({{ raw }} as int))
            when {{ raw }} rlike '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' then try_cast({{ raw }} as date)
        end
    {%- elif data_type == 'timestamp' -%}
        {#- Numbers: io.debezium.time.MicroTimestamp unless the column's meta says
            debezium_encoding: millis (Timestamp) or nanos (NanoTimestamp), bounded to
            Spark's years 1-9999 before converting (timestamp_millis fails on overflow).
            Strings: ZonedTimestamp / ISO-8601 (also PostgreSQL's range bound text). -#}
        {%- set unit = encoding or 'micros' -%}
        {%- set bounds = {
            'millis': (-62135596800000, 253402300799999),
            'micros': (-62135596800000000, 253402300799999999),
            'nanos': (-9223372036854775808, 9223372036854775807),
        } -%}
        {%- if unit not in bounds -%}
            {{ exceptions.raise_compiler_error(
                "Unknown timestamp encoding '" ~ unit ~ "'. Use millis, micros or nanos.") }}
        {%- endif %}
        case
            when {{ raw }} rlike '^-?[0-9]+$'
                and try_cast({{ raw }} as bigint) between {{ bounds[unit][0] }} and {{ bounds[unit][1] }} then
            {%- if unit == 'millis' %} timestamp_millis(try_cast({{ raw }} as bigint))
            {%- elif unit == 'micros' %} timestamp_micros(try_cast({{ raw }} as bigint))
            {%- else %} timestamp_micros(div(try_cast({{ raw }} as bigint), 1000))
            {%- endif %}
            when {{ raw }} rlike
                '^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,9})?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?$'
                then try_cast({{ raw }} as timestamp)
        end
    {%- elif cdc_range_bound_type(data_type) is not none -%}
        {{ cdc_decode_range(raw, cdc_range_bound_type(data_type)) }}
    {%- elif data_type in ['array<int>', 'array<bigint>'] -%}
        {#- a JSON array of integers (null elements allowed), each in range -#}
        {%- set element = data_type[6:-1] -%}
        case
            when forall(from_json({{ raw }}, 'array<string>'),
                x -> x is null or (x rlike '^-?[0-9]+$' and try_cast(x as {{ element }}) is not null))
                then transform(from_json({{ raw }}, 'array<string>'), x -> try_cast(x as {{ element }}))
        end
    {%- elif data_type.startswith('array') -%}
        from_json({{ raw }}, '{{ data_type }}')
    {%- elif data_type == 'binary' -%}
        {#- binary.handling.mode=bytes: base64 text -#}
        case when {{ cdc_is_base64(raw) }} then unbase64({{ raw }}) end
    {%- elif data_type in ['tinyint', 'smallint', 'int', 'bigint'] -%}
        {#- digits only, within the declared type's range; stored as cdc_storage_type -#}
        case
            when {{ raw }} rlike '^-?[0-9]+$'
                then cast(try_cast({{ raw }} as {{ data_type }}) as {{ cdc_storage_type(data_type) }})
        end
    {%- elif data_type == 'boolean' -%}
        case {{ raw }} when 'true' then true when 'false' then false end
    {%- elif data_type in ['double', 'float'] -%}
        {#- a JSON number that is finite in the type and not a non-zero one flushed to zero -#}
        case
            when {{ raw }} rlike {{ number }}
                and abs(try_cast({{ raw }} as {{ data_type }})) < cast('Infinity' as {{ data_type }})
                and (try_cast({{ raw }} as {{ data_type }}) != 0 or not regexp_extract({{ raw }}, '^[^eE]*', 0) rlike '[1-9]')
                then try_cast({{ raw }} as {{ data_type }})
        end
    {%- elif data_type == 'string' -%}
        {{ raw }}
    {%- else -%}
        cast({{ raw }} as {{ data_type }})
    {%- endif -%}
{%- endmacro %}


{#- Strict base64 (standard alphabet, padded), as Debezium writes bytes: unbase64 itself
    skips characters outside the alphabet and fails the whole query on a bad last group. -#}
{% macro cdc_is_base64(raw) -%}
    ({{ raw }} rlike '^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$')
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
    UTC offset (e.g. +00) and become the UTC instant. A bound that does not decode to
    the bound type makes the whole range null (rejected), not unbounded. -#}
{% macro cdc_decode_range(raw, bound_type) -%}
    {%- set body = 'substr(' ~ raw ~ ', 2, length(' ~ raw ~ ') - 2)' -%}
    {#- two bounds, each "quoted" or bare, split at the comma outside quotes -#}
    {%- set pattern = "'^(\"[^\"]*\"|[^\",]*),(\"[^\"]*\"|[^\",]*)$'" -%}
    {%- set lower = 'regexp_extract(' ~ body ~ ', ' ~ pattern ~ ', 1)' -%}
    {%- set upper = 'regexp_extract(' ~ body ~ ', ' ~ pattern ~ ', 2)' -%}
    case
        when {{ raw }} = 'empty' then named_struct(
            'lower', cast(null as {{ bound_type }}),
            'upper', cast(null as {{ bound_type }}),
            'lower_inclusive', false,
            'upper_inclusive', false,
            'is_empty', true
        )
        when left({{ raw }}, 1) in ('[', '(') and right({{ raw }}, 1) in (']', ')')
            and {{ body }} rlike {{ pattern }}
            and {{ cdc_range_bound_is_valid(lower, bound_type) }}
            and {{ cdc_range_bound_is_valid(upper, bound_type) }} then named_struct(
            'lower', {{ cdc_decode_range_bound(lower, bound_type) }},
            'upper', {{ cdc_decode_range_bound(upper, bound_type) }},
            'lower_inclusive', left({{ raw }}, 1) = '[',
            'upper_inclusive', right({{ raw }}, 1) = ']',
            'is_empty', false
        )
    end
{%- endmacro %}


{#- One bound of a range's text form: unquoted, empty (unbounded) or +-infinity -> null;
    else decoded strictly like a column (numrange bounds are plain decimal text). -#}
{% macro cdc_decode_range_bound(token, bound_type) -%}
    case
        when replace({{ token }}, '"', '') in ('', 'infinity', '-infinity') then null
        else {{ cdc_decode_value("replace(" ~ token ~ ", '\"', '')", bound_type,
            'string' if bound_type.startswith('decimal') else none) }}
    end
{%- endmacro %}


{#- A bound that is unbounded, infinite, or decodes to the bound type. -#}
{% macro cdc_range_bound_is_valid(token, bound_type) -%}
    (replace({{ token }}, '"', '') in ('', 'infinity', '-infinity')
        or {{ cdc_decode_range_bound(token, bound_type) }} is not null)
{%- endmacro %}
