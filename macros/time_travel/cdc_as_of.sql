{#- A silver table as it was at `as_of`: a Hudi instant (`yyyyMMddHHmmssSSS`, as
    `python -m status` and `call show_commits` print them) or a timestamp
    ('yyyy-MM-dd[ HH:mm:ss[.SSS]]'), read with Hudi's time travel (`timestamp as of`).
    `relation` is the model's relation (`ref('actor')`): a hard-delete model is read from
    its state table without the deleted keys, as its view does; a soft-delete or history
    table is read as it is. The columns are the relation's today: a column added later
    than `as_of` is not in that snapshot and the query says so. -#}
{% macro cdc_as_of(relation, as_of) %}
    {%- set as_of = as_of | string -%}
    {%- if execute and not modules.re.match('^([0-9]{14}([0-9]{3})?|[0-9]{4}-[0-9]{2}-[0-9]{2}( [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,3})?)?)$', as_of) -%}
        {{ exceptions.raise_compiler_error(
            "cdc_as_of: '" ~ as_of ~ "' is neither a Hudi instant (yyyyMMddHHmmssSSS, e.g. from "
            ~ "`python -m status`) nor a timestamp 'yyyy-MM-dd HH:mm:ss'. "
            ~ "For example: cdc_as_of(ref('actor'), '2026-12-01 06:00:00')") }}
    {%- endif -%}
    {%- set state = load_relation(cdc_state_relation(relation)) if execute else none -%}
    {%- set columns = [] -%}
    {%- for column in (adapter.get_columns_in_relation(relation) if execute else []) -%}
        {%- if not column.name.startswith('_hoodie_') -%}
            {%- do columns.append(column.name) -%}
        {%- endif -%}
    {%- endfor -%}
    select {{ '`' ~ columns | join('`, `') ~ '`' if columns else '*' }}
    from {{ state if state is not none else relation }} timestamp as of '{{ as_of }}'
    {%- if state is not none %}
    where not _cdc_deleted
    {%- endif %}
{% endmacro %}
