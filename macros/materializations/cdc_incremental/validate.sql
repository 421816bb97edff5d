{#- Checks made before anything runs; each error says how to fix it. Returns the
    primary key as a list. -#}
{% macro cdc_validate_config() %}
    {%- set primary_key = cdc_primary_key() -%}
    {%- do cdc_delete_mode() -%}
    {%- set file_format = config.get('file_format') -%}
    {%- if file_format != 'hudi' -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": materialized='cdc_incremental' needs file_format='hudi' (got '"
            ~ file_format ~ "'). Set `+file_format: hudi` for the silver folder in dbt_project.yml.") }}
    {%- endif -%}
    {%- do cdc_partition_by() -%}
    {%- do cdc_validate_hudi_options(primary_key) -%}
    {%- set column_names = cdc_model_columns() | map(attribute='name') | list -%}
    {%- for key in primary_key if key not in column_names -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": primary key column '" ~ key ~ "' is not among its columns "
            ~ column_names | join(', ') ~ ". Add it to the model's YAML.") }}
    {%- endfor -%}
    {#- A model that also sets unique_key must agree with its source's meta.primary_key,
        which the ingestion checks keys against. -#}
    {%- for source_node in cdc_source_nodes() -%}
        {%- set declared = (source_node.meta or {}).get('primary_key') -%}
        {%- if declared is not none and (declared | list) != primary_key -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": unique_key " ~ primary_key ~ " differs from meta.primary_key "
                ~ declared ~ " of its source " ~ source_node.name ~ ". Remove unique_key from the "
                ~ "model: the key is declared once, in the source's meta.primary_key.") }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(primary_key) }}
{% endmacro %}


{#- `hudi_options` may tune the silver tables (table type, buckets, compaction, file
    sizes, ...) but not what their correctness rests on: record key = the primary key,
    ordering field = _cdc_order, the upsert that applies changes and deletes, the
    partitioning (partition_by) and a partitioned table's global index. History
    tables and tables taking soft deletes stay copy-on-write. -#}
{% macro cdc_validate_hudi_options(primary_key) %}
    {%- set options = config.get('hudi_options') or {} -%}
    {%- set partitioned = cdc_partition_by() | length > 0 -%}
    {%- if options is not mapping -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": hudi_options must be a mapping of Hudi table properties (got "
            ~ options ~ ").") }}
    {%- endif -%}
    {%- for name, value in options.items() -%}
        {%- set lowered = name | string | lower -%}
        {%- if lowered in ['type', 'hoodie.table.type', 'hoodie.datasource.write.table.type']
                and (value | string | lower) not in ['cow', 'copy_on_write', 'mor', 'merge_on_read'] -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": hudi_options sets " ~ name ~ " = '" ~ value ~ "', which is not a Hudi "
                ~ "table type. Remove it, or use 'cow' (copy-on-write) or 'mor' (merge-on-read).") }}
        {%- elif lowered in ['type', 'hoodie.table.type', 'hoodie.datasource.write.table.type']
                and (value | string | lower) in ['mor', 'merge_on_read']
                and (cdc_model_config('cdc_deletes') == 'soft' or config.get('materialized') == 'cdc_history') -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": hudi_options sets " ~ name ~ " = '" ~ value ~ "', but history tables and "
                ~ "tables with cdc_deletes='soft' are copy-on-write: they take deletes in MERGE INTO, which "
                ~ "merge-on-read with event-time ordering may skip (apache/hudi#19978). Remove " ~ name
                ~ " from hudi_options.") }}
        {%- elif lowered in ['primarykey', 'hoodie.datasource.write.recordkey.field', 'hoodie.table.recordkey.fields',
                'precombinefield', 'hoodie.datasource.write.precombine.field', 'hoodie.table.precombine.field',
                'hoodie.table.ordering.fields', 'orderingfields'] -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": hudi_options sets " ~ name ~ ", which cdc_incremental derives itself "
                ~ "(record key = the primary key " ~ primary_key ~ ", ordering field = _cdc_order). Remove it; "
                ~ "change the key in the source's meta.primary_key.") }}
        {%- elif lowered in ['hoodie.datasource.write.partitionpath.field', 'hoodie.table.partition.fields'] -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": hudi_options sets " ~ name ~ "; partition a silver model with dbt's "
                ~ "partition_by (its columns, e.g. `partition_by: [city_id]`), which also gives it the index that "
                ~ "moves a row between partitions. Remove " ~ name ~ " from hudi_options.") }}
        {%- elif partitioned and lowered in cdc_partition_option_names() -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": hudi_options sets " ~ name ~ ", but a model with partition_by keeps each "
                ~ "key once across partitions only with the global index cdc_incremental sets itself "
                ~ "(cdc_partition_options, docs/decisions/silver-partitioned-global-index.md). Remove " ~ name
                ~ " from hudi_options.") }}
        {%- elif lowered in cdc_upsert_properties('hard') -%}
            {{ exceptions.raise_compiler_error(
                "Model " ~ model.name ~ ": hudi_options sets " ~ name ~ ", which cdc_incremental sets itself: "
                ~ "silver takes its changes and deletes in a Hudi upsert configured by it (cdc_upsert_properties). "
                ~ "Remove it.") }}
        {%- endif -%}
    {%- endfor -%}
{% endmacro %}


{#- `cdc_deletes`: hard (default: a deleted row leaves silver), soft (it stays with
    `_cdc_is_deleted` = true and `_cdc_deleted_at`, keeping its last values) or ignore
    (an insert-only log such as an outbox: deletes, truncates and re-snapshots remove
    nothing). The merge steps see 'ignore' as 'hard': no delete event reaches them. -#}
{% macro cdc_delete_mode() %}
    {%- set mode = cdc_model_config('cdc_deletes') or 'hard' -%}
    {%- if mode not in ['hard', 'soft', 'ignore'] -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": cdc_deletes is '" ~ mode ~ "'. Use 'hard' (deleted rows leave "
            ~ "the table, the default), 'soft' (they stay, flagged by _cdc_is_deleted) or 'ignore' "
            ~ "(an insert-only log: source deletes, truncates and re-snapshots remove nothing).") }}
    {%- endif -%}
    {{ return('hard' if mode == 'ignore' else mode) }}
{% endmacro %}


{#- True for `cdc_deletes: ignore`: delete events and resets are left out of the batch. -#}
{% macro cdc_ignores_deletes() %}
    {%- do cdc_delete_mode() -%}
    {{ return(cdc_model_config('cdc_deletes') == 'ignore') }}
{% endmacro %}


{#- Why an existing silver table (a current-state model's stored table, a history
    table) must be rebuilt from all of bronze instead of merged into, or none:
      - its first build stopped after creating it but before its watermark (a crash);
      - the model's partition_by differs from the table's (`cdc.partition_by`, none on
        an unpartitioned table): Hudi fixes a table's partition fields and index;
      - the model's YAML declares a column the table lacks, or a wider data_type (a
        column added upstream and then to the YAML, a widened type): merging would
        leave rows the merge does not touch without it, unlike a full refresh.
    A data_type every stored value does not convert to safely (string -> int, bigint
    -> int) stops the model with an error naming the table, column and both types.
    A column stored wider than declared (cdc_storage_type) is compared by the type it
    was declared as when the table was built (table property `cdc.declared_types`). -#}
{% macro cdc_rebuild_reason(relation) %}
    {%- set properties = cdc_table_properties(relation) -%}
    {%- if properties.get('cdc.watermark') is none -%}
        {{ return("it has no watermark (its first build stopped half way)") }}
    {%- endif -%}
    {%- set partition_by = cdc_partition_by() | join(',') -%}
    {%- if (properties.get('cdc.partition_by') or '') != partition_by -%}
        {{ return("the model's partition_by is [" ~ partition_by ~ "], the table's ["
            ~ (properties.get('cdc.partition_by') or '') ~ "]") }}
    {%- endif -%}
    {%- set stored = {} -%}
    {%- for column in adapter.get_columns_in_relation(relation) -%}
        {%- do stored.update({column.name | lower: column.data_type | lower | replace(' ', '')}) -%}
    {%- endfor -%}
    {%- for entry in (properties.get('cdc.declared_types') or '').split(',') if ':' in entry -%}
        {%- set name, declared = entry.split(':', 1) -%}
        {%- if stored.get(name) == cdc_storage_type(declared) -%}
            {%- do stored.update({name: declared}) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- for column in cdc_model_columns() -%}
        {%- if column.name | lower not in stored -%}
            {{ return("the model declares column " ~ column.name ~ ", which the table lacks") }}
        {%- elif stored[column.name | lower] != column.declared_type -%}
            {%- set stored_type = stored[column.name | lower] -%}
            {%- if not cdc_is_widening(stored_type, column.declared_type) -%}
                {{ exceptions.raise_compiler_error(
                    "Model " ~ model.name ~ ": table " ~ relation ~ " column " ~ column.name ~ " is " ~ stored_type
                    ~ " but the model's YAML declares " ~ column.declared_type ~ ", which not every stored value "
                    ~ "converts to safely. Other tables are built as usual. If the source column really changed "
                    ~ "type, rebuild this table from bronze on purpose (events that do not decode are rejected "
                    ~ "into " ~ relation.identifier ~ "__cdc_rejected): dbt build --full-refresh --select "
                    ~ model.name ~ "; otherwise restore its data_type " ~ stored_type ~ " in the YAML.") }}
            {%- endif -%}
            {{ return("the model declares " ~ column.name ~ " " ~ column.declared_type ~ ", the table has "
                ~ stored_type) }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(none) }}
{% endmacro %}


{#- Whether the build rebuilds instead of merging: the model's relation is not what this
    layout keeps (a hard-delete model's table of the layout before the state table, its
    state table gone), or cdc_rebuild_reason gives a reason. A soft-delete model's
    relation that is a view is refused: it is not a table this materialization built.
    `view_properties`: a hard-delete model's view's properties (cdc_has_read_path). -#}
{% macro cdc_validate_state(existing_relation, stored_relation, view_properties) %}
    {%- set soft = cdc_delete_mode() == 'soft' -%}
    {%- set reason = none -%}
    {%- if soft and existing_relation.is_view -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ ": " ~ existing_relation ~ " is a view; a model with cdc_deletes='soft' keeps "
            ~ "its rows in a table of that name. Rebuild it: dbt build --full-refresh --select " ~ model.name) }}
    {%- elif not soft and not existing_relation.is_view -%}
        {%- set reason = "it is a table of an earlier layout; it becomes a view over " ~ stored_relation
            ~ " (docs/decisions/silver-one-state-table.md)" -%}
    {%- elif not soft and load_relation(stored_relation) is none -%}
        {%- set reason = "its state table " ~ stored_relation ~ " is missing" -%}
    {%- else -%}
        {%- set reason = cdc_rebuild_reason(stored_relation) -%}
        {%- if reason is none and not soft and not cdc_has_read_path(view_properties, stored_relation) -%}
            {%- set reason = "its view reads the state table of a layout before the recent table "
                ~ cdc_recent_relation(existing_relation) ~ " (docs/decisions/silver-read-path.md)" -%}
        {%- endif -%}
    {%- endif -%}
    {%- if reason is not none -%}
        {{ log("WARNING " ~ model.name ~ ": rebuilding " ~ existing_relation ~ " from all of bronze: " ~ reason ~ ".",
            info=true) }}
        {{ return(true) }}
    {%- endif -%}
    {{ return(false) }}
{% endmacro %}


{#- True when every value of Spark type `stored` converts to `declared` without loss:
    integers to wider integers, decimals or doubles that hold them, float to double,
    decimal(p,s) to one with as many integer and fraction digits, date to timestamp,
    anything to string (types lower-cased, without spaces). -#}
{% macro cdc_is_widening(stored, declared) %}
    {%- set integer_digits = {'tinyint': 3, 'smallint': 5, 'int': 10, 'bigint': 19} -%}
    {%- set decimal = modules.re.match('^decimal[(]([0-9]+),([0-9]+)[)]$', declared) -%}
    {%- set stored_decimal = modules.re.match('^decimal[(]([0-9]+),([0-9]+)[)]$', stored) -%}
    {%- if declared == 'string' or (stored == 'float' and declared == 'double')
            or (stored == 'date' and declared == 'timestamp') -%}
        {{ return(true) }}
    {%- elif stored in integer_digits and declared in integer_digits -%}
        {{ return(integer_digits[declared] >= integer_digits[stored]) }}
    {%- elif stored in integer_digits and declared == 'double' -%}
        {{ return(stored != 'bigint') }}
    {%- elif stored in integer_digits and decimal -%}
        {{ return(decimal.group(1) | int - decimal.group(2) | int >= integer_digits[stored]) }}
    {%- elif stored_decimal and decimal -%}
        {{ return(decimal.group(2) | int >= stored_decimal.group(2) | int
            and decimal.group(1) | int - decimal.group(2) | int
                >= stored_decimal.group(1) | int - stored_decimal.group(2) | int) }}
    {%- endif -%}
    {{ return(false) }}
{% endmacro %}
