{#- The watermark is the newest bronze Hudi commit a silver table has applied, kept as
    the table property `cdc.watermark`, read when a build begins (cdc_stages takes the
    window after it). It is written after the merge: a run that stops in between
    re-applies that window next time, which the merge makes harmless.

    `watermark` (the cdc.watermark property of `relation`, or none), checked to be a
    Hudi instant. -#}
{% macro cdc_checked_watermark(relation, watermark) %}
    {%- if watermark is not none and not modules.re.match('^[0-9]+$', watermark) -%}
        {{ exceptions.raise_compiler_error(
            relation ~ " has a malformed cdc.watermark '" ~ watermark ~ "'. Rebuild it: "
            ~ "dbt build --full-refresh --select " ~ model.name) }}
    {%- endif -%}
    {{ return(watermark) }}
{% endmacro %}


{#- With the watermark, `cdc.sources`: the bronze tables it is a commit of, so that
    `python -m status` can tell the table's lag behind them without parsing the project;
    and `properties`, in the same statement. -#}
{% macro cdc_write_watermark(target_relation, batch, properties={}) %}
    {%- set newest = run_query('select max(_cdc_window_commit_time) from ' ~ batch).columns[0].values()[0] -%}
    {%- if newest is not none -%}
        {%- set sources = [] -%}
        {%- for source_node in cdc_source_nodes() -%}
            {%- set name = source_node.schema ~ '.' ~ source_node.identifier -%}
            {%- if modules.re.match('^[A-Za-z0-9_]+[.][A-Za-z0-9_]+$', name) -%}
                {%- do sources.append(name) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- set written = {'cdc.watermark': newest, 'cdc.sources': sources | join(',')} -%}
        {%- do written.update(properties) -%}
        {%- do cdc_set_tblproperties(target_relation, written, 'cdc_write_watermark') -%}
    {%- endif -%}
{% endmacro %}


{#- True when no bronze table the model reads has a commit newer than `watermark`: the
    window is empty and the build can stop before evaluating the model, which lists every
    bronze file and scans the change log for resets. Reads only each table's Hudi
    timeline (`call show_commits`, newest first). False without a watermark. -#}
{% macro cdc_bronze_unchanged_since(watermark) %}
    {%- if watermark is none -%}
        {{ return(false) }}
    {%- endif -%}
    {%- set sources = cdc_source_nodes() -%}
    {%- for source_node in sources -%}
        {%- set name = source_node.schema ~ '.' ~ source_node.identifier -%}
        {%- if not modules.re.match('^[A-Za-z0-9_]+[.][A-Za-z0-9_]+$', name) -%}
            {{ return(false) }}
        {%- endif -%}
        {%- set newest = run_query("call show_commits(table => '" ~ name ~ "', limit => 1)") -%}
        {#- compared as numbers: agate may type the instant column as a number -#}
        {%- if newest.rows | length == 0
                or (newest.columns['commit_time'].values()[0] | string | int) > (watermark | int) -%}
            {{ return(false) }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(sources | length > 0) }}
{% endmacro %}
