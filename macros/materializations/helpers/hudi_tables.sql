{#- Creating Hudi tables and setting their properties (silver's and gold's). -#}


{#- Hudi table properties: copy-on-write (the state table: cdc_state_table_options),
    record key = primary key, ordering field = _cdc_order (without it Hudi keeps
    duplicates of a key), zstd parquet (faster and smaller than Hudi's default gzip),
    files of at most 16 MiB (a copy-on-write write rewrites each file group a change
    falls in as one task: with Hudi's 120 MiB a table under that is one file group,
    rewritten by one core), plus `hudi_options`.
    Measured by benchmarks/silver_index.py (docs/decisions/silver-index-codec-file-size.md).
    `cdc.declared_types` lists the columns stored wider than declared (cdc_storage_type)
    as name:declared type, for cdc_rebuild_reason. `table_options` (the state table's
    cdc_state_table_options) go over the defaults, `hudi_options` over both. -#}
{% macro cdc_hudi_tblproperties(primary_key, table_options={}) %}
    {%- set options = {
        'type': 'cow',
        'primaryKey': primary_key | join(','),
        'preCombineField': '_cdc_order',
    } -%}
    {%- do options.update(cdc_parquet_file_options()) -%}
    {%- set declared_types = [] -%}
    {%- for column in cdc_model_columns() if column.declared_type != column.data_type -%}
        {%- do declared_types.append(column.name | lower ~ ':' ~ column.declared_type) -%}
    {%- endfor -%}
    {%- if declared_types -%}
        {%- do options.update({'cdc.declared_types': declared_types | join(',')}) -%}
    {%- endif -%}
    {%- do options.update(table_options) -%}
    {%- do options.update(config.get('hudi_options') or {}) -%}
    {{ cdc_tblproperties_clause(options) }}
{% endmacro %}


{#- zstd parquet files of at most 16 MiB, Hudi tables' file settings here (silver's
    and gold's, cdc_hudi_tblproperties). -#}
{% macro cdc_parquet_file_options() %}
    {{ return({
        'hoodie.parquet.compression.codec': 'zstd',
        'hoodie.parquet.max.file.size': 16 * 1024 * 1024,
        'hoodie.parquet.small.file.limit': 12 * 1024 * 1024,
    }) }}
{% endmacro %}


{#- A CREATE TABLE's `tblproperties (...)`: every option of `options`, in its order, its
    value as a string literal. -#}
{% macro cdc_tblproperties_clause(options) -%}
    tblproperties (
        {%- for key, value in options.items() %}
        '{{ key }}' = {{ cdc_string_literal(value) }}{{ "," if not loop.last }}
        {%- endfor %}
    )
{%- endmacro %}


{#- ALTER TABLE `relation` SET TBLPROPERTIES: `properties` (sorted by name), each value
    as a string literal, run as statement `name`. -#}
{% macro cdc_set_tblproperties(relation, properties, name) %}
    {%- call statement(name) -%}
        alter table {{ relation }} set tblproperties (
            {%- for key, value in properties | dictsort %}
            '{{ key }}' = {{ cdc_string_literal(value) }}{{ "," if not loop.last }}
            {%- endfor %}
        )
    {%- endcall -%}
{% endmacro %}


{#- CREATE TABLE `relation` USING hudi AS `sql`, first removing the folder a build
    killed while creating the table may have left at its location: Spark refuses to
    create a managed table over it. Such a folder is found by listing its
    `.hoodie/hoodie.properties` (next to the batch work table, which always exists
    here, so the listing never fails), registered and dropped with PURGE.
    `partition_by`: the partition columns (cdc_partition_by), none for an unpartitioned table. -#}
{% macro cdc_create_hudi_table_as(relation, primary_key, sql, batch, table_options={}, partition_by=[]) %}
    {%- set location = [] -%}
    {%- for row in run_query('describe database extended ' ~ relation.schema) if row[0] == 'Location' -%}
        {%- do location.append(row[1] | replace("'", "")) -%}
    {%- endfor -%}
    {%- set location = location[0] -%}
    {%- set probe = relation.identifier ~ '__cdc_probe' -%}
    {%- call statement('cdc_probe_' ~ relation.identifier) -%}
        create or replace temporary view {{ probe }}
        using binaryFile
        options (
            path '{{ location }}/{{ "{" }}{{ relation.identifier }}/.hoodie,{{ batch.identifier }}{{ "}" }}',
            recursiveFileLookup 'true',
            pathGlobFilter 'hoodie.properties'
        )
    {%- endcall -%}
    {%- if run_query('select count(*) from ' ~ probe).columns[0].values()[0] > 0 -%}
        {{ log("WARNING " ~ model.name ~ ": " ~ location ~ "/" ~ relation.identifier ~ " holds a table the catalog "
            ~ "does not know (a build killed while creating it): removing it.", info=true) }}
        {%- call statement('cdc_register_orphan_' ~ relation.identifier) -%}
            create table {{ relation }} using hudi location '{{ location }}/{{ relation.identifier }}'
        {%- endcall -%}
        {%- call statement('cdc_drop_orphan_' ~ relation.identifier) -%}
            drop table {{ relation }} purge
        {%- endcall -%}
    {%- endif -%}
    {%- call statement('cdc_drop_probe_' ~ relation.identifier) -%}
        drop view if exists {{ probe }}
    {%- endcall -%}
    {%- call statement('cdc_create_' ~ relation.identifier) -%}
        create table {{ relation }}
        using hudi
        {%- if partition_by %}
        partitioned by (`{{ partition_by | join('`, `') }}`)
        {%- endif %}
        {{ cdc_hudi_tblproperties(primary_key, table_options) }}
        as {{ sql }}
    {%- endcall -%}
{% endmacro %}
