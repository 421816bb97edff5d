{#- The row columns of a silver model, read from its YAML (`columns:` with `data_type`). -#}
{% macro cdc_model_columns() %}
    {%- set supported = ['int', 'smallint', 'tinyint', 'bigint', 'string', 'boolean', 'date', 'timestamp',
                         'double', 'float', 'binary', 'array<string>', 'array<int>', 'array<bigint>'] -%}
    {%- set columns = [] -%}
    {%- for name, column in cdc_model_node().columns.items() if not name.startswith('_cdc_') -%}
        {%- if not modules.re.match('^[A-Za-z_][A-Za-z0-9_]*$', name) -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": column name '" ~ name ~ "' is not a plain identifier "
                ~ "(letters, digits, underscore). Rename it in the model's YAML.") }}
        {%- endif -%}
        {%- set data_type = (column.data_type or '') | lower | replace(' ', '') | replace('integer', 'int') -%}
        {%- if not (data_type in supported
                    or modules.re.match('^decimal[(][0-9]+,[0-9]+[)]$', data_type)
                    or cdc_range_bound_type(data_type) is not none) -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": column '" ~ name ~ "' has data_type '" ~ (column.data_type or '')
                ~ "'. Give every column a data_type, one of " ~ supported | join(', ') ~ ", decimal(p,s) or "
                ~ "a range struct<lower:T,upper:T,lower_inclusive:boolean,upper_inclusive:boolean,is_empty:boolean> "
                ~ "(T one of timestamp, date, int, bigint, decimal(p,s)).") }}
        {%- endif -%}
        {#- meta.cdc_derived: not decoded from the change event; the model's SQL computes it
            (e.g. a generated column logical replication does not publish). -#}
        {%- set derived = (column.meta or {}).get('cdc_derived', false) is true -%}
        {%- do columns.append({
            'name': name,
            'data_type': cdc_storage_type(data_type),
            'declared_type': data_type,
            'encoding': (column.meta or {}).get('debezium_encoding'),
            'toastable': not derived and (data_type in ['string', 'binary'] or data_type.startswith('array')
                or data_type.startswith('struct')),
            'derived': derived,
        }) -%}
    {%- endfor -%}
    {%- if execute and columns | rejectattr('derived') | list | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ " declares no columns. List the source table's columns with their "
            ~ "data_type under `columns:` in the model's YAML.") }}
    {%- endif -%}
    {{ return(columns) }}
{% endmacro %}


{#- The Spark type silver stores a declared data_type as: Hudi has no tinyint (its writer
    refuses ByteType) and records a smallint as int in the catalog while its files hold
    smallint, so both are stored as int; their values are still checked against the
    declared range (cdc_decode_value) and the declared type is kept in table property
    `cdc.declared_types` (cdc_hudi_tblproperties). -#}
{% macro cdc_storage_type(data_type) %}
    {{ return({'tinyint': 'int', 'smallint': 'int'}.get(data_type, data_type)) }}
{% endmacro %}


{#- The bound type T of a range column declared as
    struct<lower:T,upper:T,lower_inclusive:boolean,upper_inclusive:boolean,is_empty:boolean>
    (data_type already lower-cased, spaces removed), or none for any other type. -#}
{% macro cdc_range_bound_type(data_type) %}
    {%- set match = modules.re.match(
        '^struct<lower:(timestamp|date|int|bigint|decimal[(][0-9]+,[0-9]+[)]),upper:([a-z0-9(),]+),'
        ~ 'lower_inclusive:boolean,upper_inclusive:boolean,is_empty:boolean>$', data_type) -%}
    {%- if match and match.group(1) == match.group(2) -%}
        {{ return(match.group(1)) }}
    {%- endif -%}
    {{ return(none) }}
{% endmacro %}


{#- The primary key of a silver model, as a list: `meta.primary_key` of its bronze source,
    declared once in the sources' YAML (the ingestion checks events against it too). A
    model may still set `unique_key`; it must then be the same (cdc_validate_config). -#}
{% macro cdc_primary_key() %}
    {%- if not execute -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set found = namespace(key=cdc_model_config('unique_key')) -%}
    {%- for source_node in cdc_source_nodes() if not found.key -%}
        {%- set found.key = (source_node.meta or {}).get('primary_key') -%}
    {%- endfor -%}
    {%- set key = found.key -%}
    {%- if key is none or key | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ " has no primary key. Declare the source table's primary key once, as "
            ~ "`meta: {primary_key: [<columns>]}` of its bronze source in the sources' YAML.") }}
    {%- endif -%}
    {{ return([key] if key is string else key | list) }}
{% endmacro %}


{#- `columns` (from cdc_model_columns) as select-list items of a row that carries only
    the columns named in `keep` (e.g. the primary key; from `alias` when given) and typed
    nulls for the others: the non-change rows of a batch. Ends with a comma. -#}
{% macro cdc_columns_or_nulls(columns, keep=[], alias=none) -%}
    {%- for column in columns %}
    {%- if column.name in keep %}
    {{ alias ~ '.' if alias }}`{{ column.name }}`,
    {%- else %}
    cast(null as {{ column.data_type }}) as `{{ column.name }}`,
    {%- endif %}
    {%- endfor %}
{%- endmacro %}


{#- The model a stage is compiled for: the model itself or, in a dbt unit test
    (`unit_tests:`, where `model` is the test and dbt gives no access to the tested
    model's YAML), the table the test declares in `overrides: vars:
    cdc_unit_test_model: {primary_key: [...], columns: {name: data_type or a column
    spec, ...}, cdc_deletes: ...}`, with its primary key as config `unique_key`. -#}
{% macro cdc_model_node() %}
    {%- if not model.get('tested_node_unique_id') -%}
        {{ return(model) }}
    {%- endif -%}
    {%- set declared = var('cdc_unit_test_model', none) -%}
    {%- if declared is none and execute -%}
        {{ exceptions.raise_compiler_error(
            "Unit test " ~ model.name ~ ": dbt gives unit tests no access to the tested model's YAML. Declare "
            ~ "the table under `overrides: vars: cdc_unit_test_model: {primary_key: [...], columns: {<name>: "
            ~ "<data_type>, ...}}`.") }}
    {%- endif -%}
    {%- set declared = declared or {} -%}
    {%- set columns = {} -%}
    {%- for name, spec in declared.get('columns', {}).items() -%}
        {%- do columns.update({name: {'data_type': spec} if spec is string else spec}) -%}
    {%- endfor -%}
    {{ return({'name': model.name, 'columns': columns, 'depends_on': {'nodes': []},
               'config': {'unique_key': declared.get('primary_key'), 'cdc_deletes': declared.get('cdc_deletes')}}) }}
{% endmacro %}


{#- A config value of cdc_model_node (`name`, e.g. cdc_deletes), or none. -#}
{% macro cdc_model_config(name) %}
    {%- if not model.get('tested_node_unique_id') -%}
        {{ return(config.get(name)) }}
    {%- endif -%}
    {{ return(cdc_model_node().config.get(name)) }}
{% endmacro %}


{#- The dbt source nodes (bronze change logs) the model reads: none in a unit test. -#}
{% macro cdc_source_nodes() %}
    {%- set nodes = [] -%}
    {%- for node_id in cdc_model_node().depends_on.nodes if node_id.startswith('source.') -%}
        {%- do nodes.append(graph.sources[node_id]) -%}
    {%- endfor -%}
    {{ return(nodes) }}
{% endmacro %}
