{#- What a silver model calls. Its SQL, compiled and run on its own (`dbt show`,
    `dbt compile`), returns what its table holds:

      cdc_current_state(source(...))     current-state tables: the latest event per
                                         primary key over all of bronze, deleted keys
                                         left out (cdc_deletes='soft': kept, flagged)
      cdc_history_versions(source(...))  history tables: every version of every key

    The materialization builds the table from the same stages (cdc_stages,
    cdc_history_stages) but over the bronze commits after the table's watermark, with
    deletes, resets and rejected events kept for it to apply: it swaps the part between
    the two markers below for that batch, so the rest of the model (derived columns)
    applies to both alike (cdc_model_batch_sql). -#}
{% macro cdc_current_state(change_log) %}
    {%- set columns = cdc_model_columns() | rejectattr('derived') | map(attribute='name') | list -%}
    {{ cdc_stage_begin() }}
    {{ cdc_current_rows('(' ~ cdc_stages(change_log, none) ~ ')', columns) }}
    {{ cdc_stage_end() }}
{% endmacro %}


{% macro cdc_history_versions(change_log) %}
    {%- set columns = cdc_model_columns() | rejectattr('derived') | map(attribute='name') | list -%}
    {{ cdc_stage_begin() }}
    {{ cdc_history_rows('(' ~ cdc_history_stages(change_log, none, none) ~ ')', columns) }}
    {{ cdc_stage_end() }}
{% endmacro %}


{#- The rows of a batch (a relation or a parenthesised query, from cdc_stages) that a
    current-state table holds: row columns `columns`, then the CDC metadata of
    cdc_silver_columns (the soft-delete flags computed here). -#}
{% macro cdc_current_rows(batch, columns) -%}
    {%- set soft = cdc_delete_mode() == 'soft' -%}
    select
        `{{ (columns + cdc_metadata_columns()) | join('`,\n        `') }}`
    {%- if soft %},
        _cdc_deleted as _cdc_is_deleted,
        case when _cdc_deleted then _cdc_source_ts end as _cdc_deleted_at,
        _cdc_values_order
    {%- endif %}
    from {{ batch }} as cdc_batch
    where _cdc_row = 'change' {{- "" if soft else " and not _cdc_deleted" }}
{%- endmacro %}


{#- The rows of a history batch (from cdc_history_stages) a history table holds: row
    columns `columns`, then the validity and metadata of cdc_history_columns. -#}
{% macro cdc_history_rows(batch, columns) -%}
    select
        `{{ (columns + cdc_history_metadata_columns()) | join('`,\n        `') }}`
    from {{ batch }} as cdc_batch
    where _cdc_row = 'version'
{%- endmacro %}


{#- The stages of a current-state build over bronze change log `change_log` (a
    relation), each a CTE with a fixed shape (docs/reference/silver-stages.md):
      cdc_change_log      all of bronze
      cdc_window          bronze rows of commits after `watermark` (all when none)
      cdc_resets          one row: the truncate and complete snapshot that supersede
                          older events (cdc_resets, over all of bronze; with
                          `reset_groups`, the groups of all bronze before the window
                          that a build stored, over the window only)
      cdc_change_events   the window decoded to the model's columns (cdc_change_events)
      cdc_latest_per_key  the latest event per key, plus rejected events and the reset
                          row, tagged by `_cdc_row` (cdc_latest_per_key) -#}
{% macro cdc_stages(change_log, watermark, reset_groups=none) -%}
    {%- if cdc_linting() -%}
    select * from {{ change_log }}
    {%- else -%}
    with
    cdc_change_log as (
        select * from {{ change_log }}
    ),
    cdc_window as (
        select * from cdc_change_log
        where {{ cdc_window_predicate(watermark) }}
    ),
    cdc_resets as (
        {{ cdc_resets('cdc_change_log', none) if reset_groups is none or watermark is none
            else cdc_resets('cdc_window', reset_groups) }}
    ),
    cdc_change_events as (
        {{ cdc_change_events('cdc_window', 'cdc_resets') }}
    ),
    cdc_latest_per_key as (
        {{ cdc_latest_per_key('cdc_change_events', 'cdc_resets') }}
    )
    select * from cdc_latest_per_key
    {%- endif -%}
{%- endmacro %}


{#- The stages of a history build: as cdc_stages, but every event is decoded (a late
    event can split or merge stored versions) and `cdc_versions` recomputes the
    versions of the keys the window touches (`applied`: the resets the table was last
    built with; a new one rebuilds it, see cdc_history_window). -#}
{% macro cdc_history_stages(change_log, watermark, applied) -%}
    {%- if cdc_linting() -%}
    select * from {{ change_log }}
    {%- else -%}
    with
    cdc_change_log as (
        select * from {{ change_log }}
    ),
    cdc_resets as (
        {{ cdc_resets('cdc_change_log') }}
    ),
    cdc_change_events as (
        {{ cdc_change_events('cdc_change_log', 'cdc_resets', truncated='keep') }}
    ),
    cdc_versions as (
        {{ cdc_versions('cdc_change_log', 'cdc_change_events', 'cdc_resets', watermark, applied) }}
    )
    select * from cdc_versions
    {%- endif -%}
{%- endmacro %}


{#- Bronze rows of Hudi commits after `watermark` (bronze commit order, never source
    timestamps: late events arrive in later commits); every row when none. -#}
{% macro cdc_window_predicate(watermark) -%}
    {%- if watermark is none -%}
        true
    {%- else -%}
        _hoodie_commit_time > {{ cdc_string_literal(watermark) }}
    {%- endif -%}
{%- endmacro %}


{#- True while sqlfluff renders the models (.sqlfluff sets the var cdc_lint): the lint
    checks the SQL a model's file holds and ignores what macros render
    (ignore_templated_areas), so the stages render as a plain read of the change log
    instead of hundreds of generated lines it would parse and then ignore. Spark runs
    the real stages in every build the tests make. -#}
{% macro cdc_linting() %}{{ return(var('cdc_lint', false) | as_bool) }}{% endmacro %}


{% macro cdc_stage_begin() %}/* cdc stage: begin */{% endmacro %}


{% macro cdc_stage_end() %}/* cdc stage: end */{% endmacro %}
