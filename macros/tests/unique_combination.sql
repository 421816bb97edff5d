{#- No two rows share the same values of `columns` (a composite primary key). -#}
{% test unique_combination(model, columns) %}
    {%- if columns is string or columns | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "unique_combination on " ~ model ~ ": `columns` must be a list of column names, e.g. [film_id, actor_id]") }}
    {%- endif %}
    select
        {{ columns | join(', ') }},
        count(*) as n_rows
    from {{ model }}
    group by {{ columns | join(', ') }}
    having count(*) > 1
{% endtest %}
