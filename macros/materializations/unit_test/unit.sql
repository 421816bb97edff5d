{#- dbt's unit tests on Spark: dbt's own `unit` materialization, but the temporary view
    that tells the model's column types is created without fetching a result.

    dbt-core's version creates it with run_query, which fetches; a Spark Thrift Server
    answers a CREATE TEMPORARY VIEW with a result set whose schema has no columns, and
    PyHive then fails on them ('NoneType' object is not iterable), so every unit test
    failed on the `thrift` target (docs/how-to/run-on-a-cluster.md). The rest is dbt's
    protocol through its own macros: the expected rows typed like the model's columns,
    compared with the model's rows on the given inputs, in one query. -#}
{% materialization unit, adapter='spark' %}
    {%- set expected_rows = config.get('expected_rows') -%}
    {%- set expected_sql = config.get('expected_sql') -%}
    {%- set sql_header = config.get('sql_header') if flags.REQUIRE_SQL_HEADER_IN_TEST_CONFIGS else none -%}
    {%- set tested_columns = expected_rows[0].keys() if expected_rows | length > 0 else get_columns_in_query(sql) -%}

    {%- set temp_relation = make_temp_relation(this.incorporate(type='table')) -%}
    {%- call statement('unit_test_model_columns', fetch_result=false) -%}
        {{ get_create_table_as_sql(true, temp_relation, get_empty_subquery_sql(sql)) }}
    {%- endcall -%}
    {%- set data_types, quoted = {}, {} -%}
    {%- for column in adapter.get_columns_in_relation(temp_relation) -%}
        {%- do data_types.update({column.name | lower: column.data_type}) -%}
        {%- do quoted.update({column.name | lower: column.quoted}) -%}
    {%- endfor -%}
    {%- set tested_quoted = [] -%}
    {%- for name in tested_columns -%}
        {%- do tested_quoted.append(quoted[name | lower]) -%}
    {%- endfor -%}
    {%- if not expected_sql -%}
        {%- set expected_sql = get_expected_sql(expected_rows, data_types, quoted) -%}
    {%- endif -%}

    {%- call statement('main', fetch_result=true) -%}
        {% if sql_header %}{{ sql_header }}{% endif %}
        {{ get_unit_test_sql(sql, expected_sql, tested_quoted) }}
    {%- endcall -%}

    {%- do adapter.drop_relation(temp_relation) -%}
    {{ return({'relations': []}) }}
{% endmaterialization %}
