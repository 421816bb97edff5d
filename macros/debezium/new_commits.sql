{#- Incremental window on a bronze change log: only rows of Hudi commits after the
    silver model's watermark (bronze commit order, never source timestamps: late events
    arrive in later commits). On a first or full-refresh build: every row. -#}
{% macro cdc_new_commits() -%}
    {%- set watermark = cdc_read_watermark() -%}
    {%- if watermark is none -%}
        true
    {%- else -%}
        _hoodie_commit_time > '{{ watermark }}'
    {%- endif -%}
{%- endmacro %}
