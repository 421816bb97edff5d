{#- Partitioned silver (dbt's `partition_by`, Hive-style folders `<column>=<value>`):
    a key lives once, in the folder of its latest event, which takes Hudi's global index
    moving rows (cdc_partition_options), and a hard-deleted key's flagged row, its values
    nulled, lands in Hudi's default partition (docs/how-to/partition-silver.md). -#}

{#- The model's `partition_by` as a list of its column names (as its YAML spells them),
    empty without one; checked before any SQL is built from them. -#}
{% macro cdc_partition_by() %}
    {%- set configured = config.get('partition_by') -%}
    {%- if configured is none or configured == '' or configured == [] -%}
        {{ return([]) }}
    {%- endif -%}
    {%- if config.get('materialized') == 'cdc_history' -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": cdc_history does not support partition_by (a version that moved to "
            ~ "another partition would be kept in both: history tables take their versions in MERGE INTO "
            ~ "without the global index partitioned current-state tables use). Remove partition_by, and "
            ~ "partition a gold model built from it instead.") }}
    {%- endif -%}
    {%- set names = [configured] if configured is string else configured -%}
    {%- if names is mapping or names is not iterable -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": partition_by is " ~ configured ~ "; give a column name or a list of "
            ~ "them, e.g. `partition_by: [city_id]`.") }}
    {%- endif -%}
    {%- set columns = {} -%}
    {%- for column in cdc_model_columns() -%}
        {%- do columns.update({column.name | lower: column}) -%}
    {%- endfor -%}
    {#- a partition value is a folder name: types whose text names a value exactly and
        gives a bounded number of folders -#}
    {%- set partition_types = ['string', 'boolean', 'tinyint', 'smallint', 'int', 'bigint', 'date'] -%}
    {%- set partition_by = [] -%}
    {%- for name in names -%}
        {%- if name is not string or (name | lower) not in columns -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": partition_by names " ~ (name | tojson) ~ ", which is not one of its "
                ~ "columns (" ~ columns.values() | map(attribute='name') | join(', ') ~ "). Name columns of the "
                ~ "model's YAML, e.g. `partition_by: [" ~ (columns.values() | map(attribute='name') | first)
                ~ "]`, or remove partition_by.") }}
        {%- endif -%}
        {%- set column = columns[name | lower] -%}
        {%- if column.name in partition_by -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": partition_by names " ~ column.name ~ " twice. Name each column once.") }}
        {%- endif -%}
        {%- if column.declared_type not in partition_types -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": partition_by names " ~ column.name ~ ", a " ~ column.declared_type
                ~ " column; a partition column must be one of " ~ partition_types | join(', ') ~ ". Partition by "
                ~ "another column, or derive one (a date from a timestamp) in the model's YAML with "
                ~ "meta.cdc_derived and its SQL.") }}
        {%- endif -%}
        {%- do partition_by.append(column.name) -%}
    {%- endfor -%}
    {{ return(partition_by) }}
{% endmacro %}


{#- The Hudi properties of a partitioned stored table (none unpartitioned): GLOBAL_BLOOM
    with the partition path updated, so a key whose partition value changes leaves its
    old folder, chosen over GLOBAL_SIMPLE (as right, slower) by
    benchmarks/silver_partition_index.py (docs/decisions/silver-partitioned-global-index.md),
    and `cdc.partition_by` for cdc_rebuild_reason. -#}
{% macro cdc_partition_options(partition_by) %}
    {%- if not partition_by -%}
        {{ return({}) }}
    {%- endif -%}
    {{ return({
        'hoodie.index.type': 'GLOBAL_BLOOM',
        'hoodie.bloom.index.update.partition.path': 'true',
        'cdc.partition_by': partition_by | join(','),
    }) }}
{% endmacro %}


{#- The Hudi options a model with partition_by may not set in `hudi_options`: the index
    and whether it moves a row (cdc_partition_options). -#}
{% macro cdc_partition_option_names() %}
    {{ return(['hoodie.index.type', 'hoodie.simple.index.update.partition.path',
        'hoodie.bloom.index.update.partition.path', 'hoodie.record.index.update.partition.path']) }}
{% endmacro %}
