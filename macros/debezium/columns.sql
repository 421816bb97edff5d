{#- The row columns of a silver model, read from its YAML (`columns:` with `data_type`). -#}
{% macro cdc_model_columns() %}
    {%- set supported = ['int', 'smallint', 'tinyint', 'bigint', 'string', 'boolean', 'date', 'timestamp',
                         'double', 'float', 'binary', 'array<string>', 'array<int>', 'array<bigint>'] -%}
    {%- set columns = [] -%}
    {%- for name, column in model.columns.items() if not name.startswith('_cdc_') -%}
        {%- if not modules.re.match('^[A-Za-z_][A-Za-z0-9_]*$', name) -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": column name '" ~ name ~ "' is not a plain identifier "
                ~ "(letters, digits, underscore). Rename it in the model's YAML.") }}
        {%- endif -%}
        {%- set data_type = (column.data_type or '') | lower | replace(' ', '') | replace('integer', 'int') -%}
        {%- if not (data_type in supported or modules.re.match('^decimal[(][0-9]+,[0-9]+[)]$', data_type)) -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": column '" ~ name ~ "' has data_type '" ~ (column.data_type or '')
                ~ "'. Give every column a data_type, one of " ~ supported | join(', ') ~ " or decimal(p,s).") }}
        {%- endif -%}
        {%- do columns.append({
            'name': name,
            'data_type': data_type,
            'encoding': (column.meta or {}).get('debezium_encoding'),
            'toastable': data_type in ['string', 'binary'] or data_type.startswith('array'),
        }) -%}
    {%- endfor -%}
    {%- if execute and columns | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ " declares no columns. List the source table's columns with their "
            ~ "data_type under `columns:` in the model's YAML.") }}
    {%- endif -%}
    {{ return(columns) }}
{% endmacro %}


{#- The primary key of a silver model: its `unique_key` config, as a list. -#}
{% macro cdc_primary_key() %}
    {%- set key = config.get('unique_key') -%}
    {%- if not execute -%}
        {{ return([]) }}
    {%- endif -%}
    {%- if key is none or key | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ " has no unique_key. Set `config: {unique_key: [<primary key columns>]}` "
            ~ "in its YAML to the source table's primary key.") }}
    {%- endif -%}
    {{ return([key] if key is string else key) }}
{% endmacro %}
