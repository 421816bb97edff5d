{#- The watermark is the newest bronze Hudi commit a silver table has applied, kept as
    the table property `cdc.watermark`. It is written after the merge: a run that stops
    in between re-applies that window next time, which the merge makes harmless. -#}
{% macro cdc_read_watermark() %}
    {%- if not execute or should_full_refresh() -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set relation = adapter.get_relation(database=this.database, schema=this.schema, identifier=this.identifier) -%}
    {%- if relation is none or cdc_rebuild_reason(relation) is not none -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set watermark = cdc_table_property(relation, 'cdc.watermark') -%}
    {%- if watermark is not none and not modules.re.match('^[0-9]+$', watermark) -%}
        {{ exceptions.raise_compiler_error(
            relation ~ " has a malformed cdc.watermark '" ~ watermark ~ "'. Rebuild it: "
            ~ "dbt build --full-refresh --select " ~ model.name) }}
    {%- endif -%}
    {{ return(watermark) }}
{% endmacro %}


{% macro cdc_write_watermark(target_relation, batch) %}
    {%- set newest = run_query('select max(_cdc_window_commit_time) from ' ~ batch).columns[0].values()[0] -%}
    {%- if newest is not none -%}
        {%- call statement('cdc_write_watermark') -%}
            alter table {{ target_relation }} set tblproperties ('cdc.watermark' = '{{ newest }}')
        {%- endcall -%}
    {%- endif -%}
{% endmacro %}
