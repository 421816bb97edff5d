{#- The columns a silver table holds, and how keys are joined. -#}


{#- The CDC metadata every current-state table holds after its row columns: the
    operation, order, source time and bronze commit of the event its row comes from. -#}
{% macro cdc_metadata_columns() %}
    {{ return(['_cdc_op', '_cdc_order', '_cdc_source_ts', '_cdc_commit_time']) }}
{% endmacro %}


{#- Columns written to silver: the model's row columns, then CDC metadata (soft deletes:
    the deletion flag and time, and the order of the event the values come from). -#}
{% macro cdc_silver_columns() %}
    {%- set names = cdc_model_columns() | map(attribute='name') | list -%}
    {%- set names = names + cdc_metadata_columns() -%}
    {%- if cdc_delete_mode() == 'soft' -%}
        {%- set names = names + ['_cdc_is_deleted', '_cdc_deleted_at', '_cdc_values_order'] -%}
    {%- endif -%}
    {{ return(names) }}
{% endmacro %}


{% macro cdc_key_join(left, right, primary_key) -%}
    {%- for key in primary_key -%}
        {{ left }}.`{{ key }}` = {{ right }}.`{{ key }}`{{ " and " if not loop.last }}
    {%- endfor -%}
{%- endmacro %}
