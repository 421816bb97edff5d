{#- The relations of a schema for dbt's relation cache, from two metastore listings
    (`show tables`, `show views`) instead of dbt-spark's `show table extended`, which
    reads every table's metadata: a database of hundreds of tables paid that at the
    start of every build (docs/reference/what-a-pass-builds.md). dbt needs a relation's
    name and whether it is a view; the rows carry `Type: VIEW` or `Type: MANAGED` where
    dbt-spark reads the extended listing's text (is_delta and is_iceberg stay false, as
    this project writes neither). `dbt docs generate` reads each table's columns with
    `describe` instead (dbt-spark's own fallback). -#}
{% macro spark__list_relations_without_caching(relation) %}
    {%- set views = run_query('show views in ' ~ relation.schema).columns['viewName'].values() -%}
    {%- set rows = [] -%}
    {%- for row in run_query('show tables in ' ~ relation.schema) -%}
        {%- do rows.append([row['namespace'], row['tableName'], row['isTemporary'],
            'Type: VIEW' if row['tableName'] in views else 'Type: MANAGED']) -%}
    {%- endfor -%}
    {{ return(rows) }}
{% endmacro %}
