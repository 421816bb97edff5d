{#- Change events -> the latest event per primary key (deletes included, flagged), which
    is what a silver table applies. A column whose value Debezium left out as an
    unchanged TOAST value takes the key's latest real value in the batch; if there is
    none, its name is listed in `_cdc_unavailable` and the merge keeps the stored value. -#}
{% macro cdc_latest_per_key(change_events) %}
    {#- derived columns are computed by the model from this result -#}
    {%- set columns = cdc_model_columns() | rejectattr('derived') | list -%}
    {%- set primary_key = cdc_primary_key() -%}
    {%- set toastable = columns | selectattr('toastable') | list %}
    select
        {%- for column in columns %}
        {%- if column.name in primary_key %}
        `{{ column.name }}`,
        {%- elif column.toastable %}
        max_by(`{{ column.name }}`, case when not `_cdc_unavailable__{{ column.name }}` then _cdc_order end)
            as `{{ column.name }}`,
        {%- else %}
        max_by(`{{ column.name }}`, _cdc_order) as `{{ column.name }}`,
        {%- endif %}
        {%- endfor %}
        max_by(_cdc_op, _cdc_order) as _cdc_op,
        max_by(_cdc_deleted, _cdc_order) as _cdc_deleted,
        max(_cdc_order) as _cdc_order,
        max_by(_cdc_source_ts, _cdc_order) as _cdc_source_ts,
        max_by(_cdc_commit_time, _cdc_order) as _cdc_commit_time,
        -- newest bronze commit read for the key (the watermark), winning or not
        max(_cdc_commit_time) as _cdc_window_commit_time,
        {%- if toastable %}
        filter(array(
            {%- for column in toastable %}
            case when count_if(not `_cdc_unavailable__{{ column.name }}`) = 0 then '{{ column.name }}' end
            {{- "," if not loop.last }}
            {%- endfor %}
        ), name -> name is not null) as _cdc_unavailable
        {%- else %}
        cast(array() as array<string>) as _cdc_unavailable
        {%- endif %}
    from {{ change_events }}
    where {% for key in primary_key %}`{{ key }}` is not null{{ " and " if not loop.last }}{% endfor %}
    group by {% for key in primary_key %}`{{ key }}`{{ ", " if not loop.last }}{% endfor %}
{% endmacro %}
